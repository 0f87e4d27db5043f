//! TLS with rustls (ring provider): PEM certificates and keys, and exporter-toolkit's client
//! authentication types mapped onto rustls client certificate verifiers.
//!
//! exporter-toolkit reads the certificate, key and client CA files at every handshake, so a
//! renewed certificate (cert-manager, certbot) is served without a reload; [`ServerTls`] does the
//! same, looking at the files' size, times and inode at most once a second and loading them again
//! when one changed. Files that cannot be loaded are logged, and the certificate loaded before
//! goes on serving: a half-written renewal must not take the exporter off the air; they are tried
//! again at every look until they load. The connection that finds a look due waits for it, so a
//! change counts from the first connection after it however long none came (a client CA taken
//! away lets no client in once more); the look runs on a blocking thread and is waited for a
//! second at most: a mount that hangs (NFS, a CSI driver) holds up one connection that long, and
//! no other.

use rustls::crypto::{CryptoProvider, SupportedKxGroup, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, NamedGroup, RootCertStore, ServerConfig,
    SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};
use tracing::{info, warn};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;

/// exporter-toolkit's `client_auth_type`, named after Go's `tls.ClientAuthType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    NoClientCert,
    /// Asks for a certificate, takes any or none, checks nothing.
    RequestClientCert,
    /// Needs a certificate, checks only that the client holds its key.
    RequireAnyClientCert,
    /// Checks a certificate against the client CA if the client sends one.
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    pub(crate) const NAMES: [(&'static str, ClientAuth); 5] = [
        ("NoClientCert", ClientAuth::NoClientCert),
        ("RequestClientCert", ClientAuth::RequestClientCert),
        ("RequireAnyClientCert", ClientAuth::RequireAnyClientCert),
        ("VerifyClientCertIfGiven", ClientAuth::VerifyClientCertIfGiven),
        ("RequireAndVerifyClientCert", ClientAuth::RequireAndVerifyClientCert),
    ];

    pub(crate) fn from_name(name: &str) -> Option<ClientAuth> {
        // "RequireClientCert" is the old name exporter-toolkit still accepts.
        let name = if name == "RequireClientCert" { "RequireAnyClientCert" } else { name };
        Self::NAMES.iter().find(|(known, _)| *known == name).map(|(_, client_auth)| *client_auth)
    }

    fn verifies_against_ca(self) -> bool {
        matches!(self, ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert)
    }

    pub(crate) fn requires_certificate(self) -> bool {
        matches!(self, ClientAuth::RequireAnyClientCert | ClientAuth::RequireAndVerifyClientCert)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TlsVersion {
    Tls12,
    Tls13,
}

/// Where a PEM document comes from: a file (as written, and resolved against the web config's
/// folder) or text inline in the web config.
#[derive(Clone)]
pub(crate) struct PemSource {
    /// The key of the web config it was read from, e.g. `tls_server_config.cert_file`.
    field: String,
    origin: PemOrigin,
}

#[derive(Clone)]
enum PemOrigin {
    File { written: String, path: PathBuf },
    Inline(String),
}

impl PemSource {
    /// `tls_server_config.<name>_file` if it is set (resolved against `base_dir`), else the
    /// inline `tls_server_config.<name>`, else `None`.
    pub(crate) fn pick(name: &str, file: Option<String>, inline: Option<String>, base_dir: &Path) -> Option<Self> {
        let (suffix, origin) = match (file, inline) {
            (Some(written), _) => ("_file", PemOrigin::File { path: base_dir.join(&written), written }),
            (None, Some(text)) => ("", PemOrigin::Inline(text)),
            (None, None) => return None,
        };
        Some(Self { field: format!("tls_server_config.{name}{suffix}"), origin })
    }

    fn read(&self) -> Result<Vec<u8>, String> {
        match &self.origin {
            PemOrigin::File { written, path } => crate::files::read_bounded(path, crate::files::MAX_CONFIG_BYTES)
                .map_err(|error| format!("{}: cannot read {written}: {error}", self.field)),
            PemOrigin::Inline(text) => Ok(text.as_bytes().to_vec()),
        }
    }

    fn file_stamp(&self) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt as _;
        let PemOrigin::File { path, .. } = &self.origin else { return None };
        let metadata = std::fs::metadata(path).ok()?;
        Some(FileStamp {
            length: metadata.len(),
            modified: metadata.modified().ok(),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
            inode: (metadata.dev(), metadata.ino()),
        })
    }

    /// How error messages name this source: the file as written, or "the inline text".
    fn name(&self) -> &str {
        match &self.origin {
            PemOrigin::File { written, .. } => written,
            PemOrigin::Inline(_) => "the inline text",
        }
    }
}

/// Shows file names only, never inline text (an inline `key` is a secret).
impl fmt::Debug for PemSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            PemOrigin::File { path, .. } => write!(f, "{}: {}", self.field, path.display()),
            PemOrigin::Inline(text) => write!(f, "{}: <inline, {} bytes>", self.field, text.len()),
        }
    }
}

/// The TLS configuration served: the one loaded last from the files of a `tls_server_config`.
#[derive(Debug)]
pub(crate) struct ServerTls {
    settings: TlsSettings,
    loaded: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    config: Arc<ServerConfig>,
    /// The files as they were when `config` was loaded.
    files: Vec<Option<FileStamp>>,
    /// The files as they were when they last failed to load, not to warn twice of the same.
    failed: Option<Vec<Option<FileStamp>>>,
    looked_at: Instant,
    /// Whether a look at the files is under way: one at a time.
    looking: bool,
}

/// What shows that a file changed: a renewal writes a new file (new inode, as cert-manager's
/// symlink swap and certbot do), rewrites this one (new size or modification time), or changes
/// its mode or owner so that it can be read (new change time).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    length: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
    inode: (u64, u64),
}

/// How often the files are looked at, at most.
const LOOK_AT_FILES_EVERY: Duration = Duration::from_secs(1);
/// How long a connection waits for a look at the files (a hung network file system, say).
const LOOK_WAIT: Duration = Duration::from_secs(1);

impl ServerTls {
    /// Loads the files; an error names the field and the file, never a key's content.
    pub(crate) fn load(settings: TlsSettings) -> Result<Self, String> {
        // The stamps first: a file changed while loading is loaded again at the next look.
        let files = settings.file_stamps();
        let config = settings.server_config()?;
        let loaded = Loaded { config, files, failed: None, looked_at: Instant::now(), looking: false };
        Ok(Self { settings, loaded: Mutex::new(loaded) })
    }

    /// The configuration for a new connection. Once a second at most, the files are looked at
    /// first (on a blocking thread, waited for [`LOOK_WAIT`] at most), so that a renewed
    /// certificate or a client CA taken away counts from the first connection after the change,
    /// however long none came. One look at a time: the connections meanwhile get the
    /// configuration loaded before.
    pub(crate) async fn current(self: &Arc<Self>) -> Arc<ServerConfig> {
        if self.start_look() {
            let this = self.clone();
            let look = tokio::task::spawn_blocking(move || this.look_at_files());
            if tokio::time::timeout(LOOK_WAIT, look).await.is_err() {
                warn!("looking at the TLS files took over a second; connections get the configuration loaded before until it ends");
            }
        }
        self.loaded_config()
    }

    /// The configuration loaded last.
    fn loaded_config(&self) -> Arc<ServerConfig> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner).config.clone()
    }

    /// Whether a look at the files is due, and if so marks it begun.
    fn start_look(&self) -> bool {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let due = !loaded.looking && loaded.looked_at.elapsed() >= LOOK_AT_FILES_EVERY;
        if due {
            (loaded.looking, loaded.looked_at) = (true, Instant::now());
        }
        due
    }

    /// Loads the files again if they changed since they were last loaded.
    fn look_at_files(&self) {
        // Whatever happens here, even a panic, the next look may start.
        let _done = LookDone(self);
        let files = self.settings.file_stamps();
        let changed = files != self.loaded.lock().unwrap_or_else(PoisonError::into_inner).files;
        let reloaded = changed.then(|| self.settings.server_config());
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        match reloaded {
            None => {}
            Some(Ok(config)) => {
                (loaded.config, loaded.files, loaded.failed) = (config, files, None);
                info!("the TLS certificate, key or client CA files changed; new connections use them");
            }
            Some(Err(problem)) => {
                if loaded.failed.as_ref() != Some(&files) {
                    warn!(%problem, "the TLS certificate, key or client CA files changed but cannot be loaded; the certificate loaded before is still served, and they are tried again every second");
                }
                loaded.failed = Some(files);
            }
        }
    }
}

/// Ends a look at the files when dropped.
struct LookDone<'a>(&'a ServerTls);

impl Drop for LookDone<'_> {
    fn drop(&mut self) {
        let mut loaded = self.0.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        (loaded.looking, loaded.looked_at) = (false, Instant::now());
    }
}

/// Go's names of cipher suites (`tls.CipherSuites()` and `tls.InsecureCipherSuites()`), the
/// ones exporter-toolkit accepts in `cipher_suites`. Go applies the list to TLS 1.2 only, as here.
pub(crate) const GO_CIPHER_SUITES: [&str; 25] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
];

/// Go's names of curves in `curve_preferences`, each with the rustls group of the same curve.
pub(crate) const GO_CURVES: [(&str, NamedGroup); 5] = [
    ("CurveP256", NamedGroup::secp256r1),
    ("CurveP384", NamedGroup::secp384r1),
    ("CurveP521", NamedGroup::secp521r1),
    ("X25519", NamedGroup::X25519),
    ("X25519MLKEM768", NamedGroup::X25519MLKEM768),
];

/// Whether `name` is Go's name of the suite (for TLS 1.2, the IANA name, as rustls's).
fn go_names_it(name: &str, suite: &SupportedCipherSuite) -> bool {
    suite.suite().as_str() == Some(name)
}

/// The suites named that rustls has no TLS 1.2 implementation of (TLS 1.3 names are ignored, as
/// by Go).
pub(crate) fn suites_not_offered(named: &[String]) -> Vec<&str> {
    let provider = rustls::crypto::ring::default_provider();
    let tls12 = || provider.cipher_suites.iter().filter(|suite| suite.version() == &rustls::version::TLS12);
    named
        .iter()
        .map(String::as_str)
        .filter(|name| !name.starts_with("TLS_AES_") && !name.starts_with("TLS_CHACHA20_"))
        .filter(|name| !tls12().any(|suite| go_names_it(name, suite)))
        .collect()
}

/// The curves named that rustls's provider does not offer.
pub(crate) fn curves_not_offered(named: &[String]) -> Vec<&str> {
    let provider = rustls::crypto::ring::default_provider();
    named.iter().map(String::as_str).filter(|name| kx_group(&provider, name).is_none()).collect()
}

fn kx_group(provider: &CryptoProvider, go_name: &str) -> Option<&'static dyn SupportedKxGroup> {
    let (_, group) = GO_CURVES.iter().find(|(name, _)| *name == go_name)?;
    provider.kx_groups.iter().find(|kx| kx.name() == *group).copied()
}

/// The validated `tls_server_config`.
#[derive(Clone, Debug)]
pub(crate) struct TlsSettings {
    pub(crate) certificate: PemSource,
    pub(crate) key: PemSource,
    pub(crate) client_ca: Option<PemSource>,
    pub(crate) client_auth: ClientAuth,
    pub(crate) min_version: TlsVersion,
    pub(crate) max_version: TlsVersion,
    pub(crate) client_allowed_sans: Option<Vec<String>>,
    /// Whether the server's order of cipher suites wins over the client's.
    pub(crate) prefer_server_cipher_suites: bool,
    /// The TLS 1.2 suites offered, by Go's names; none: rustls's own.
    pub(crate) cipher_suites: Option<Vec<String>>,
    /// The key exchange groups offered, in order, by Go's names; none: rustls's own.
    pub(crate) curve_preferences: Option<Vec<String>>,
}

impl TlsSettings {
    /// The rules that need no file: those exporter-toolkit checks, and a CA for the verifying
    /// types (Go would fall back to the system's roots; a client CA of the public web makes no
    /// sense for an exporter, so it must be named).
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.min_version > self.max_version {
            return Err("min_version is above max_version".into());
        }
        if self.client_ca.is_some() && self.client_auth == ClientAuth::NoClientCert {
            return Err("client CA's have been configured without a Client Auth Policy (client_auth_type)".into());
        }
        if self.client_auth.verifies_against_ca() && self.client_ca.is_none() {
            return Err("client_auth_type VerifyClientCertIfGiven and RequireAndVerifyClientCert need client_ca_file or client_ca".into());
        }
        if self.client_allowed_sans.is_some() && !self.client_auth.requires_certificate() {
            return Err("client_allowed_sans requires client_auth_type to be one of RequireAnyClientCert or RequireAndVerifyClientCert".into());
        }
        self.provider().map(drop)
    }

    /// rustls's provider with the suites and curves the settings ask for.
    fn provider(&self) -> Result<CryptoProvider, String> {
        let mut provider = rustls::crypto::ring::default_provider();
        if let Some(named) = self.cipher_suites.as_ref().filter(|named| !named.is_empty()) {
            let tls12 = |suite: &SupportedCipherSuite| suite.version() == &rustls::version::TLS12;
            let spoken: Vec<&str> =
                provider.cipher_suites.iter().filter(|s| tls12(s)).filter_map(|s| s.suite().as_str()).collect();
            provider.cipher_suites.retain(|suite| !tls12(suite) || named.iter().any(|name| go_names_it(name, suite)));
            if self.min_version == TlsVersion::Tls12 && !provider.cipher_suites.iter().any(tls12) {
                return Err(format!(
                    "cipher_suites: none of them is a TLS 1.2 suite rustls speaks ({}); name one of those, or set min_version: TLS13",
                    spoken.join(", ")
                ));
            }
        }
        if let Some(named) = self.curve_preferences.as_ref().filter(|named| !named.is_empty()) {
            let groups: Vec<_> = named.iter().filter_map(|name| kx_group(&provider, name)).collect();
            if groups.is_empty() {
                return Err(
                    "curve_preferences: none of them is a curve rustls speaks (X25519, CurveP256, CurveP384)".into()
                );
            }
            provider.kx_groups = groups;
        }
        Ok(provider)
    }

    /// Reads the certificate, key and client CA, and builds the rustls configuration. Errors name
    /// the field and the file, never the key's content.
    pub(crate) fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        let provider = Arc::new(self.provider().map_err(|problem| format!("tls_server_config: {problem}"))?);
        let chain = certificates(&self.certificate)?;
        let key = self.private_key()?;
        // Read apart from the certificate, so that a key rustls cannot use is not called a misfit.
        provider.key_provider.load_private_key(key.clone_key()).map_err(|error| {
            format!(
                "tls_server_config: the key in {} is of a kind rustls does not serve (it serves RSA of 2,048 bits or more, ECDSA P-256 and P-384, and Ed25519; not P-521 or Ed448): {error}",
                self.key.name()
            )
        })?;
        let verifier = self.client_verifier(&provider)?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&self.protocol_versions())
            .map_err(|error| format!("tls_server_config: {error}"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|error| {
                format!(
                    "tls_server_config: the key in {} does not fit the certificate in {}: {error}",
                    self.key.name(),
                    self.certificate.name()
                )
            })?;
        // Only HTTP/1.1 is served; saying so lets a client that offers h2 settle on it.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.ignore_client_order = self.prefer_server_cipher_suites;
        Ok(Arc::new(config))
    }

    /// How the files named look now (`None`: not there, or inline text).
    fn file_stamps(&self) -> Vec<Option<FileStamp>> {
        let sources = [Some(&self.certificate), Some(&self.key), self.client_ca.as_ref()];
        sources.into_iter().flatten().map(PemSource::file_stamp).collect()
    }

    fn protocol_versions(&self) -> Vec<&'static SupportedProtocolVersion> {
        let versions = [(TlsVersion::Tls12, &rustls::version::TLS12), (TlsVersion::Tls13, &rustls::version::TLS13)];
        let allowed = self.min_version..=self.max_version;
        versions.into_iter().filter(|(version, _)| allowed.contains(version)).map(|(_, rustls)| rustls).collect()
    }

    fn private_key(&self) -> Result<PrivateKeyDer<'static>, String> {
        let pem = self.key.read()?;
        // The PEM parser's messages may quote the file, so none of it goes into the error.
        PrivateKeyDer::from_pem_slice(&pem).map_err(|_| {
            format!(
                "{}: no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1) in {}",
                self.key.field,
                self.key.name()
            )
        })
    }

    fn client_verifier(&self, provider: &Arc<CryptoProvider>) -> Result<Arc<dyn ClientCertVerifier>, String> {
        if self.client_auth == ClientAuth::NoClientCert {
            return Ok(WebPkiClientVerifier::no_client_auth());
        }
        let ca = if self.client_auth.verifies_against_ca() {
            // Whether a certificate is needed is `mandatory` below: rustls asks the outer verifier.
            let builder = WebPkiClientVerifier::builder_with_provider(self.client_roots()?, provider.clone());
            Some(builder.build().map_err(|error| format!("tls_server_config: client verification: {error}"))?)
        } else {
            // Not used to verify, but read as exporter-toolkit reads it: one named that is missing
            // or holds no certificate is refused, not ignored.
            if self.client_ca.is_some() {
                self.client_roots()?;
            }
            None
        };
        Ok(Arc::new(ClientCertificates {
            ca,
            mandatory: self.client_auth.requires_certificate(),
            allowed_sans: self.client_allowed_sans.clone(),
            algorithms: provider.signature_verification_algorithms,
        }))
    }

    fn client_roots(&self) -> Result<Arc<RootCertStore>, String> {
        let Some(source) = &self.client_ca else {
            return Err("tls_server_config: client_ca_file or client_ca is needed to verify clients".into());
        };
        let mut roots = RootCertStore::empty();
        let (added, _unusable) = roots.add_parsable_certificates(certificates(source)?);
        if added == 0 {
            return Err(format!("{}: no usable CA certificate in {}", source.field, source.name()));
        }
        Ok(Arc::new(roots))
    }
}

/// All CERTIFICATE blocks of a PEM document; at least one.
fn certificates(source: &PemSource) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = source.read()?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| format!("{}: {} is not valid PEM: {error}", source.field, source.name()))?;
    if chain.is_empty() {
        return Err(format!("{}: no PEM CERTIFICATE in {}", source.field, source.name()));
    }
    Ok(chain)
}

/// The client certificate verifier of every type but `NoClientCert`. With a client CA, its
/// verifier checks the certificate first; without one, any certificate is taken, but the handshake
/// still proves that the client holds its private key. Then, with `client_allowed_sans`, one of
/// the certificate's subject alternative names (DNS, e-mail, URI or IP) must equal an allowed value.
#[derive(Debug)]
struct ClientCertificates {
    ca: Option<Arc<dyn ClientCertVerifier>>,
    mandatory: bool,
    allowed_sans: Option<Vec<String>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for ClientCertificates {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.ca.as_ref().map_or(&[], |ca| ca.root_hint_subjects())
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if let Some(ca) = &self.ca {
            ca.verify_client_cert(end_entity, intermediates, now)?;
        }
        let error = match self.allowed_sans.as_ref().map(|allowed| certificate_allows(end_entity, allowed)) {
            None | Some(Some(true)) => return Ok(ClientCertVerified::assertion()),
            Some(Some(false)) => CertificateError::ApplicationVerificationFailure,
            Some(None) => CertificateError::BadEncoding,
        };
        Err(rustls::Error::InvalidCertificate(error))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Whether one of the certificate's subject alternative names equals an allowed value; `None` when
/// the certificate cannot be read.
fn certificate_allows(certificate: &[u8], allowed: &[String]) -> Option<bool> {
    let (_, certificate) = X509Certificate::from_der(certificate).ok()?;
    let names = certificate.subject_alternative_name().ok()?;
    let names = names.map(|extension| extension.value.general_names.as_slice()).unwrap_or_default();
    Some(names.iter().any(|name| allowed.iter().any(|allowed| san_matches(name, allowed))))
}

/// The kinds of name exporter-toolkit matches: DNS, e-mail, URI exactly, IP as an address.
fn san_matches(name: &GeneralName, allowed: &str) -> bool {
    match name {
        GeneralName::DNSName(text) | GeneralName::RFC822Name(text) | GeneralName::URI(text) => *text == allowed,
        // Compared as addresses, so `::1` and `0:0:0:0:0:0:0:1` are the same.
        GeneralName::IPAddress(octets) => ip_address(octets)
            .zip(allowed.parse::<IpAddr>().ok())
            .is_some_and(|(name, allowed)| name.to_canonical() == allowed.to_canonical()),
        _ => false,
    }
}

fn ip_address(octets: &[u8]) -> Option<IpAddr> {
    let v4 = <[u8; 4]>::try_from(octets).map(IpAddr::from);
    v4.or_else(|_| <[u8; 16]>::try_from(octets).map(IpAddr::from)).ok()
}

#[cfg(test)]
mod tests;

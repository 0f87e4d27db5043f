//! Helpers for the unit tests: temporary folders, a small PKI, cheap bcrypt hashes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A folder under the system's temp dir, removed on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("capi-web-test-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).expect("temp dir");
        TempDir(path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    pub(crate) fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write test file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// PEM documents of a CA and of a server certificate for localhost and 127.0.0.1 that it signed.
pub(crate) struct TestPki {
    pub(crate) ca: String,
    pub(crate) server_cert: String,
    pub(crate) server_key: String,
}

impl TestPki {
    pub(crate) fn new() -> TestPki {
        let ca = certificate_authority("test CA");
        let (server_cert, server_key) =
            leaf(&["localhost", "127.0.0.1"], rcgen::ExtendedKeyUsagePurpose::ServerAuth, &ca);
        TestPki { ca: ca.pem(), server_cert, server_key }
    }

    /// Writes the files a web config names: server.crt, server.key, ca.crt.
    pub(crate) fn write_server_files(&self, dir: &TempDir) {
        dir.write("server.crt", &self.server_cert);
        dir.write("server.key", &self.server_key);
        dir.write("ca.crt", &self.ca);
    }
}

fn certificate_authority(name: &str) -> rcgen::CertifiedIssuer<'static, rcgen::KeyPair> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    let key = rcgen::KeyPair::generate().expect("CA key");
    rcgen::CertifiedIssuer::self_signed(params, key).expect("CA certificate")
}

fn leaf(
    names: &[&str],
    usage: rcgen::ExtendedKeyUsagePurpose,
    issuer: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
) -> (String, String) {
    let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
    let mut params = rcgen::CertificateParams::new(names).expect("leaf params");
    params.extended_key_usages = vec![usage];
    let key = rcgen::KeyPair::generate().expect("leaf key");
    let certificate = params.signed_by(&key, issuer).expect("leaf certificate");
    (certificate.pem(), key.serialize_pem())
}

/// A bcrypt hash at the lowest cost, so tests stay fast.
pub(crate) fn cheap_hash(password: &str) -> String {
    bcrypt::hash(password, 4).expect("bcrypt hash")
}

//! The subject alternative names of an X.509 certificate, read from its DER with a minimal reader.
//!
//! rustls exposes no parsed certificate, and webpki lists only DNS and URI names, while
//! exporter-toolkit's `client_allowed_sans` also matches e-mail addresses and IP addresses. The
//! reader walks only the path to the SAN extension and never indexes past its input.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SubjectAltName {
    Dns(String),
    Email(String),
    Uri(String),
    Ip(IpAddr),
}

const SEQUENCE: u8 = 0x30;
const OBJECT_IDENTIFIER: u8 = 0x06;
const OCTET_STRING: u8 = 0x04;
/// `[3] EXPLICIT Extensions` in TBSCertificate.
const EXTENSIONS: u8 = 0xA3;
/// The content bytes of OID 2.5.29.17, subjectAltName.
const SUBJECT_ALT_NAME_OID: [u8; 3] = [0x55, 0x1D, 0x11];
/// GeneralName's context-specific, primitive tags.
const RFC822_NAME: u8 = 0x81;
const DNS_NAME: u8 = 0x82;
const URI: u8 = 0x86;
const IP_ADDRESS: u8 = 0x87;

/// The names in the certificate's SAN extension (empty without one); `None` when the DER on the
/// way to them is malformed.
pub(crate) fn subject_alt_names(certificate: &[u8]) -> Option<Vec<SubjectAltName>> {
    let certificate = expect(certificate, SEQUENCE)?;
    let tbs_certificate = expect(certificate, SEQUENCE)?;
    let Some(extensions) = Elements(tbs_certificate).find(|(tag, _)| *tag == EXTENSIONS).map(|(_, content)| content)
    else {
        return Some(Vec::new());
    };
    for (tag, extension) in Elements(expect(extensions, SEQUENCE)?) {
        if tag != SEQUENCE {
            return None;
        }
        if let Some(value) = subject_alt_name_value(extension) {
            return general_names(expect(value, SEQUENCE)?);
        }
    }
    Some(Vec::new())
}

/// The extnValue of an Extension when its extnID is subjectAltName.
fn subject_alt_name_value(extension: &[u8]) -> Option<&[u8]> {
    let mut parts = Elements(extension);
    let (tag, oid) = parts.next()?;
    if tag != OBJECT_IDENTIFIER || oid != SUBJECT_ALT_NAME_OID {
        return None;
    }
    // The optional `critical` BOOLEAN comes before the value.
    parts.find(|(tag, _)| *tag == OCTET_STRING).map(|(_, value)| value)
}

fn general_names(sequence: &[u8]) -> Option<Vec<SubjectAltName>> {
    Some(Elements(sequence).filter_map(|(tag, content)| general_name(tag, content)).collect())
}

/// One GeneralName of a kind exporter-toolkit matches; other kinds (directory names...) are skipped.
fn general_name(tag: u8, content: &[u8]) -> Option<SubjectAltName> {
    let text = || String::from_utf8_lossy(content).into_owned();
    match tag {
        RFC822_NAME => Some(SubjectAltName::Email(text())),
        DNS_NAME => Some(SubjectAltName::Dns(text())),
        URI => Some(SubjectAltName::Uri(text())),
        IP_ADDRESS => ip_address(content).map(SubjectAltName::Ip),
        _ => None,
    }
}

fn ip_address(content: &[u8]) -> Option<IpAddr> {
    if let Ok(octets) = <[u8; 4]>::try_from(content) {
        return Some(IpAddr::V4(Ipv4Addr::from(octets)));
    }
    <[u8; 16]>::try_from(content).ok().map(|octets| IpAddr::V6(Ipv6Addr::from(octets)))
}

/// The content of the single element at the start of `input`, which must carry `tag`.
fn expect(input: &[u8], tag: u8) -> Option<&[u8]> {
    let (found, content, _) = read_element(input)?;
    (found == tag).then_some(content)
}

/// The DER elements one after another; stops at the end or at the first malformed one.
struct Elements<'a>(&'a [u8]);

impl<'a> Iterator for Elements<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let (tag, content, rest) = read_element(self.0)?;
        self.0 = rest;
        Some((tag, content))
    }
}

/// Splits one element off `input`: its tag, its content and what follows it.
fn read_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, after_tag) = input.split_first()?;
    // High tag numbers do not occur on the path to the SAN extension.
    if tag & 0x1F == 0x1F {
        return None;
    }
    let (&first, after_first) = after_tag.split_first()?;
    let (length, after_length) = if first < 0x80 {
        (usize::from(first), after_first)
    } else {
        // Long form: the low bits count the length's bytes; 0 (indefinite) is not DER.
        let count = usize::from(first & 0x7F);
        if count == 0 || count > 4 {
            return None;
        }
        let bytes = after_first.get(..count)?;
        let length = bytes.iter().fold(0u64, |length, byte| (length << 8) | u64::from(*byte));
        (usize::try_from(length).ok()?, after_first.get(count..)?)
    };
    let content = after_length.get(..length)?;
    let rest = after_length.get(length..)?;
    Some((tag, content, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn certificate_with(names: Vec<rcgen::SanType>) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.subject_alt_names = names;
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("certificate").der().to_vec()
    }

    #[test]
    fn reads_every_kind_of_name_that_can_be_allowed() {
        let der = certificate_with(vec![
            rcgen::SanType::DnsName("scraper.example".try_into().unwrap()),
            rcgen::SanType::Rfc822Name("ops@example.com".try_into().unwrap()),
            rcgen::SanType::URI("spiffe://example/scraper".try_into().unwrap()),
            rcgen::SanType::IpAddress("10.0.0.7".parse().unwrap()),
            rcgen::SanType::IpAddress("::1".parse().unwrap()),
        ]);
        assert_eq!(
            subject_alt_names(&der),
            Some(vec![
                SubjectAltName::Dns("scraper.example".into()),
                SubjectAltName::Email("ops@example.com".into()),
                SubjectAltName::Uri("spiffe://example/scraper".into()),
                SubjectAltName::Ip("10.0.0.7".parse().unwrap()),
                SubjectAltName::Ip("::1".parse().unwrap()),
            ])
        );
    }

    #[test]
    fn a_certificate_without_names_has_none() {
        assert_eq!(subject_alt_names(&certificate_with(Vec::new())), Some(Vec::new()));
    }

    #[test]
    fn truncated_or_foreign_input_is_no_certificate() {
        let der = certificate_with(vec![rcgen::SanType::DnsName("a.example".try_into().unwrap())]);
        assert_eq!(subject_alt_names(&der[..der.len() / 2]), None);
        assert_eq!(subject_alt_names(b""), None);
        assert_eq!(subject_alt_names(&[0x30, 0x84, 0xFF, 0xFF, 0xFF, 0xFF]), None);
    }

    proptest! {
        #[test]
        fn never_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = subject_alt_names(&bytes);
        }

        #[test]
        fn never_panics_on_a_damaged_certificate(position in 0usize..1000, byte in any::<u8>()) {
            let mut der = certificate_with(vec![rcgen::SanType::DnsName("a.example".try_into().unwrap())]);
            let index = position % der.len();
            der[index] = byte;
            let _ = subject_alt_names(&der);
        }
    }
}

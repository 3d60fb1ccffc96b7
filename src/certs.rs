//! Serving certificates for the webhook Service: a private CA and a leaf certificate signed by
//! it, valid for the names the apiserver uses to reach the Service.
//!
//! [`generate`] is pure apart from key generation and the clock: it returns PEM text.
//! [`write_files`] puts that text into a directory the way `serve` expects to read it
//! (`tls.crt`, `tls.key`, plus `ca.crt` for the `caBundle`), replacing each file atomically so
//! that a running server never reads a half-written file.

use std::fmt;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use x509_parser::time::ASN1Time;

/// File names inside the output directory; `tls.crt`/`tls.key` are also the keys of a
/// `kubernetes.io/tls` Secret, so the directory can become one as it is.
pub const CA_FILE: &str = "ca.crt";
pub const CERT_FILE: &str = "tls.crt";
pub const KEY_FILE: &str = "tls.key";

/// Certificates start this long before "now", so a node whose clock lags a little accepts them.
const BACKDATE_SECONDS: i64 = 3600;

/// Longest validity accepted, in days (about 100 years).
pub const MAX_DAYS: u32 = 36_500;

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error(
        "{what} {value:?} is not a valid DNS label (lower-case letters, digits and '-', 1..63 characters, starting and ending with a letter or digit)"
    )]
    InvalidName { what: &'static str, value: String },
    #[error("--days must be 1..={MAX_DAYS}, not {0}")]
    InvalidDays(u32),
    #[error("the system clock is outside the range a certificate can express")]
    Clock,
    #[error("cannot generate the {what}: {error}")]
    Generate {
        what: &'static str,
        error: rcgen::Error,
    },
    #[error("cannot write {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// What to make: the Service's name and namespace, and how long the certificates last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertRequest {
    pub service: String,
    pub namespace: String,
    pub days: u32,
    /// IP addresses the serving certificate is also valid for (a webhook registered by
    /// `clientConfig.url: https://<ip>:<port>/...` is checked against an IP SAN).
    pub ip_addresses: Vec<std::net::IpAddr>,
}

/// The generated PEM texts. `Debug` never shows the private key.
#[derive(Clone)]
pub struct Bundle {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl fmt::Debug for Bundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bundle")
            .field("ca_pem", &self.ca_pem)
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl Bundle {
    /// The `caBundle` of a MutatingWebhookConfiguration: base64 of the CA's PEM, one line.
    pub fn ca_bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes())
    }
}

/// The DNS names a Service is reached by, shortest first; the apiserver uses
/// `<service>.<namespace>.svc`.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_string(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Makes a fresh CA and a serving certificate signed by it, both valid from an hour ago for
/// `request.days` days. Every call makes new keys.
pub fn generate(request: &CertRequest) -> Result<Bundle, CertsError> {
    check_dns_label("service", &request.service)?;
    check_dns_label("namespace", &request.namespace)?;
    if !(1..=MAX_DAYS).contains(&request.days) {
        return Err(CertsError::InvalidDays(request.days));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|_| CertsError::Clock)?
        .as_secs();
    let now = i64::try_from(now).map_err(|_| CertsError::Clock)?;
    let not_before = datetime(now - BACKDATE_SECONDS)?;
    let not_after = datetime(now + i64::from(request.days) * 86_400)?;
    let generate = |what| move |error| CertsError::Generate { what, error };

    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(generate("CA certificate"))?;
    ca_params.distinguished_name.push(
        DnType::CommonName,
        // The time tells CAs of successive rotations apart (in logs, and in a caBundle that
        // holds the old and the new CA while a rotation settles).
        format!(
            "{}.{} webhook CA {}",
            request.service,
            request.namespace,
            humantime::format_rfc3339_millis(SystemTime::now())
        ),
    );
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca_params.not_before = not_before.to_datetime();
    ca_params.not_after = not_after.to_datetime();
    let ca_key = KeyPair::generate().map_err(generate("CA key"))?;
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .map_err(generate("CA certificate"))?;
    let issuer = Issuer::new(ca_params, ca_key);

    let names = service_dns_names(&request.service, &request.namespace);
    let mut params = CertificateParams::new(names).map_err(generate("serving certificate"))?;
    params.subject_alt_names.extend(
        request
            .ip_addresses
            .iter()
            .map(|ip| rcgen::SanType::IpAddress(*ip)),
    );
    params.distinguished_name.push(
        DnType::CommonName,
        format!("{}.{}.svc", request.service, request.namespace),
    );
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = not_before.to_datetime();
    params.not_after = not_after.to_datetime();
    let key = KeyPair::generate().map_err(generate("serving key"))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(generate("serving certificate"))?;

    Ok(Bundle {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// rcgen takes `time`'s date type; x509-parser's `ASN1Time` (already used to read
/// certificates) converts to it, so no extra dependency is needed.
fn datetime(unix_seconds: i64) -> Result<ASN1Time, CertsError> {
    ASN1Time::from_timestamp(unix_seconds).map_err(|_| CertsError::Clock)
}

/// RFC 1123 label, as Kubernetes requires for namespaces and Service names.
fn check_dns_label(what: &'static str, value: &str) -> Result<(), CertsError> {
    let valid = (1..=63).contains(&value.len())
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(CertsError::InvalidName {
            what,
            value: value.to_string(),
        })
    }
}

/// Where [`write_files`] put the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wrote {} (CA), {} (serving certificate), {} (private key, mode 0600)",
            self.ca.display(),
            self.cert.display(),
            self.key.display()
        )
    }
}

/// Writes `ca.crt`, `tls.key` and `tls.crt` into `dir` (created when missing).
///
/// Each file is written to a temporary file in `dir` and renamed over the old one, so a reader
/// sees either the old or the new file, never a partial one. The key file is created with mode
/// 0600 (never wider, not even for a moment). The CA is written first, so it is in place before
/// the certificate it signs; the key before the certificate, since a server that reads a new
/// certificate with an old key refuses the pair and keeps serving the previous one until the
/// next read.
pub fn write_files(dir: &Path, bundle: &Bundle) -> Result<Written, CertsError> {
    std::fs::create_dir_all(dir).map_err(|error| CertsError::Write {
        path: dir.to_path_buf(),
        error,
    })?;
    let written = Written {
        ca: dir.join(CA_FILE),
        cert: dir.join(CERT_FILE),
        key: dir.join(KEY_FILE),
    };
    replace_file(&written.ca, bundle.ca_pem.as_bytes(), 0o644)?;
    replace_file(&written.key, bundle.key_pem.as_bytes(), 0o600)?;
    replace_file(&written.cert, bundle.cert_pem.as_bytes(), 0o644)?;
    Ok(written)
}

/// Writes `contents` to a new file beside `path`, created with `mode`, syncs it and renames it
/// over `path`.
fn replace_file(path: &Path, contents: &[u8], mode: u32) -> Result<(), CertsError> {
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |error| CertsError::Write { path, error }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(write_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::{CertificateError, RootCertStore};
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
    use x509_parser::extensions::GeneralName;

    use crate::server::tls::{CertSource, ServerTls};

    fn request(days: u32) -> CertRequest {
        CertRequest {
            service: "placement-webhook".into(),
            namespace: "flink-system".into(),
            days,
            ip_addresses: Vec::new(),
        }
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM certificate")
    }

    fn dns_sans(der: &[u8]) -> Vec<String> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).expect("X.509");
        let san = cert
            .subject_alternative_name()
            .expect("valid extension")
            .expect("SAN present");
        san.value
            .general_names
            .iter()
            .map(|name| match name {
                GeneralName::DNSName(dns) => dns.to_string(),
                other => panic!("unexpected SAN {other:?}"),
            })
            .collect()
    }

    fn verify(ca_pem: &str, cert_pem: &str, name: &str) -> Result<(), rustls::Error> {
        let mut roots = RootCertStore::empty();
        roots.add(der(ca_pem)).expect("CA accepted as a root");
        let verifier = WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .expect("verifier");
        let name = ServerName::try_from(name.to_string()).expect("server name");
        verifier
            .verify_server_cert(&der(cert_pem), &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }

    /// `--ip`: the certificate also verifies for that address, and only for it.
    #[test]
    fn serving_certificate_covers_the_ip_addresses_asked_for() {
        let bundle = generate(&CertRequest {
            ip_addresses: vec!["127.0.0.1".parse().expect("ip")],
            ..request(30)
        })
        .expect("generate");
        verify(&bundle.ca_pem, &bundle.cert_pem, "127.0.0.1").expect("valid for 127.0.0.1");
        assert!(verify(&bundle.ca_pem, &bundle.cert_pem, "127.0.0.2").is_err());
        let without = generate(&request(30)).expect("generate");
        assert!(verify(&without.ca_pem, &without.cert_pem, "127.0.0.1").is_err());
    }

    #[test]
    fn serving_certificate_covers_the_service_names() {
        let bundle = generate(&request(30)).expect("generate");
        let sans = dns_sans(&der(&bundle.cert_pem));
        assert_eq!(
            sans,
            [
                "placement-webhook",
                "placement-webhook.flink-system",
                "placement-webhook.flink-system.svc",
                "placement-webhook.flink-system.svc.cluster.local",
            ]
        );
        let leaf_der = der(&bundle.cert_pem);
        let (_, leaf) = x509_parser::parse_x509_certificate(&leaf_der).expect("X.509");
        assert!(!leaf.is_ca());
        let eku = leaf
            .extended_key_usage()
            .expect("valid extension")
            .expect("EKU present");
        assert!(eku.value.server_auth);
        let ca_der = der(&bundle.ca_pem);
        let (_, ca) = x509_parser::parse_x509_certificate(&ca_der).expect("X.509");
        assert!(ca.is_ca());
        assert_eq!(leaf.issuer(), ca.subject());
    }

    #[test]
    fn validity_spans_the_requested_days() {
        let now = ASN1Time::now().timestamp();
        for days in [1, 30, 365] {
            let bundle = generate(&request(days)).expect("generate");
            for pem in [&bundle.ca_pem, &bundle.cert_pem] {
                let der = der(pem);
                let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("X.509");
                let validity = cert.validity();
                let before = validity.not_before.timestamp();
                let after = validity.not_after.timestamp();
                assert!(before <= now && before >= now - BACKDATE_SECONDS - 60);
                let expected = now + i64::from(days) * 86_400;
                assert!(
                    (after - expected).abs() <= 60,
                    "not_after {after}, expected about {expected}"
                );
            }
        }
    }

    #[test]
    fn serving_certificate_verifies_against_its_ca_only() {
        let bundle = generate(&request(30)).expect("generate");
        for name in service_dns_names("placement-webhook", "flink-system") {
            verify(&bundle.ca_pem, &bundle.cert_pem, &name).expect("chains to the CA");
        }
        let err = verify(&bundle.ca_pem, &bundle.cert_pem, "other.flink-system.svc")
            .expect_err("wrong name accepted");
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })
            ),
            "{err:?}"
        );
        let other = generate(&request(30)).expect("generate");
        let err = verify(
            &other.ca_pem,
            &bundle.cert_pem,
            "placement-webhook.flink-system.svc",
        )
        .expect_err("another CA accepted");
        // UnknownIssuer when the CA names differ; BadSignature if they ever matched.
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(
                    CertificateError::UnknownIssuer | CertificateError::BadSignature
                )
            ),
            "{err:?}"
        );
    }

    #[test]
    fn written_files_load_as_the_server_reads_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("new/sub");
        let bundle = generate(&request(30)).expect("generate");
        let written = write_files(&out, &bundle).expect("write");
        assert_eq!(written.key, out.join("tls.key"));
        let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
        assert_eq!(mode(&written.key), 0o600);
        assert_eq!(
            std::fs::read_to_string(&written.ca).expect("ca"),
            bundle.ca_pem
        );
        // The server's own loader accepts the pair (and checks that the key matches).
        ServerTls::new(
            CertSource::Files {
                cert: written.cert.clone(),
                key: written.key.clone(),
            },
            None,
        )
        .expect("server loads the pair");

        // Writing again replaces every file; no temporary file is left behind.
        let again = generate(&request(30)).expect("generate");
        write_files(&out, &again).expect("rewrite");
        assert_eq!(
            std::fs::read_to_string(&written.cert).expect("cert"),
            again.cert_pem
        );
        assert_eq!(mode(&written.key), 0o600);
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["ca.crt", "tls.crt", "tls.key"]);
    }

    #[test]
    fn ca_bundle_is_one_line_of_base64_pem() {
        let bundle = generate(&request(1)).expect("generate");
        let line = bundle.ca_bundle();
        assert!(!line.contains('\n'));
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&line)
            .expect("base64");
        assert_eq!(decoded, bundle.ca_pem.as_bytes());
        assert!(!format!("{bundle:?}").contains("PRIVATE KEY"));
    }

    #[test]
    fn bad_input_is_refused() {
        for (service, namespace) in [
            ("", "ns"),
            ("Webhook", "ns"),
            ("web.hook", "ns"),
            ("-webhook", "ns"),
            ("webhook", "ns-"),
            ("webhook", &"n".repeat(64)),
        ] {
            let err = generate(&CertRequest {
                service: service.into(),
                namespace: namespace.into(),
                days: 30,
                ip_addresses: Vec::new(),
            })
            .expect_err("invalid name accepted");
            assert!(matches!(err, CertsError::InvalidName { .. }), "{err}");
        }
        for days in [0, MAX_DAYS + 1] {
            let err = generate(&request(days)).expect_err("invalid days accepted");
            assert!(matches!(err, CertsError::InvalidDays(_)), "{err}");
        }
    }
}

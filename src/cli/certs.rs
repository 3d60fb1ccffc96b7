//! Serving certificates for the webhook Service: a private CA and a leaf certificate signed by
//! it, valid for the names the apiserver uses to reach the Service.
//!
//! [`generate`] is pure apart from key generation and the clock: it returns PEM text.
//! [`write_files`] puts that text into a directory the way `serve` expects to read it
//! (`tls.crt`, `tls.key`, plus `ca.crt` for the `caBundle`), replacing each file atomically so
//! that a running server never reads a half-written file. The CA's key is kept beside its
//! certificate (`ca.key`, mode 0600), so [`renew`] can sign a new serving certificate with the
//! same CA: the `caBundle` the apiserver trusts stays as it is.

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
pub(crate) const CA_FILE: &str = "ca.crt";
pub(crate) const CERT_FILE: &str = "tls.crt";
pub(crate) const KEY_FILE: &str = "tls.key";
/// The CA's private key: never part of the Secret, only for signing the next serving certificate.
pub(crate) const CA_KEY_FILE: &str = "ca.key";

/// Certificates start this long before "now", so a node whose clock lags a little accepts them.
const BACKDATE_SECONDS: i64 = 3600;

/// Longest validity accepted, in days (about 100 years).
pub(crate) const MAX_DAYS: u32 = 36_500;

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
    #[error(
        "{} already holds a CA: a new one breaks the caBundle the apiserver trusts until it is \
         patched again. --keep-ca signs a new serving certificate with it; --force makes a new CA \
         (then rotate the caBundle as certs/README.md says)",
        path.display()
    )]
    CaExists { path: PathBuf },
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "{} is missing: the CA's key was not kept (earlier versions of this command did not \
         keep it), so it cannot sign; --force makes a new CA",
        path.display()
    )]
    NoCaKey { path: PathBuf },
    #[error("{} with {}: not a CA this command can sign with: {error}", ca.display(), key.display())]
    BadCa {
        ca: PathBuf,
        key: PathBuf,
        error: rcgen::Error,
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

/// The generated PEM texts. `Debug` never shows the private keys.
#[derive(Clone)]
pub struct Bundle {
    pub ca_pem: String,
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
    /// The CA's key when the CA is new; `None` when an existing CA signed (nothing to write).
    pub(crate) ca_key_pem: Option<String>,
}

impl fmt::Debug for Bundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bundle")
            .field("ca_pem", &self.ca_pem)
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .field(
                "ca_key_pem",
                &self.ca_key_pem.as_ref().map(|_| "<redacted>"),
            )
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
pub(crate) fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
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
    let (not_before, not_after) = validity(request)?;
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
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let (cert_pem, key_pem) = serving(request, &issuer, not_before, not_after)?;
    Ok(Bundle {
        ca_pem: ca_cert.pem(),
        cert_pem,
        key_pem,
        ca_key_pem: Some(ca_key_pem),
    })
}

/// A new serving certificate and key signed by the CA `ca.crt` and `ca.key` in `dir` hold, valid
/// from an hour ago for `request.days` days or until the CA expires, whichever comes first.
/// The CA files are left as they are.
pub fn renew(request: &CertRequest, dir: &Path) -> Result<Bundle, CertsError> {
    let (not_before, not_after) = validity(request)?;
    let (ca_path, key_path) = (dir.join(CA_FILE), dir.join(CA_KEY_FILE));
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound if path == key_path => CertsError::NoCaKey {
                path: path.to_path_buf(),
            },
            _ => CertsError::Read {
                path: path.to_path_buf(),
                error,
            },
        })
    };
    let ca_pem = read(&ca_path)?;
    let ca_key_pem = read(&key_path)?;
    let bad = |error| CertsError::BadCa {
        ca: ca_path.clone(),
        key: key_path.clone(),
        error,
    };
    let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(bad)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).map_err(bad)?;
    // A certificate that outlives its CA stops verifying when the CA does.
    let ca_not_after = {
        use rustls_pki_types::pem::PemObject;
        rustls_pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes())
            .ok()
            .and_then(|der| {
                x509_parser::parse_x509_certificate(&der)
                    .ok()
                    .map(|(_, c)| c.validity().not_after)
            })
            .ok_or_else(|| bad(rcgen::Error::CouldNotParseCertificate))?
    };
    let not_after = if ca_not_after < not_after {
        ca_not_after
    } else {
        not_after
    };
    let (cert_pem, key_pem) = serving(request, &issuer, not_before, not_after)?;
    Ok(Bundle {
        ca_pem,
        cert_pem,
        key_pem,
        ca_key_pem: None,
    })
}

/// Checks `request` and returns its validity: from an hour ago, for its days.
fn validity(request: &CertRequest) -> Result<(ASN1Time, ASN1Time), CertsError> {
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
    Ok((
        datetime(now - BACKDATE_SECONDS)?,
        datetime(now + i64::from(request.days) * 86_400)?,
    ))
}

/// The serving certificate for the Service's names, signed by `issuer`, and its new key (PEM).
fn serving(
    request: &CertRequest,
    issuer: &Issuer<'_, KeyPair>,
    not_before: ASN1Time,
    not_after: ASN1Time,
) -> Result<(String, String), CertsError> {
    let generate = |what| move |error| CertsError::Generate { what, error };
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
        .signed_by(&key, issuer)
        .map_err(generate("serving certificate"))?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// Refuses when `dir` already holds a CA certificate, which a new CA would replace.
pub fn refuse_existing_ca(dir: &Path) -> Result<(), CertsError> {
    let path = dir.join(CA_FILE);
    match std::fs::symlink_metadata(&path) {
        Ok(_) => Err(CertsError::CaExists { path }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(CertsError::Read { path, error }),
    }
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
    pub(crate) ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA's key, when the CA is new (else the CA files were kept).
    pub(crate) ca_key: Option<PathBuf>,
}

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ca_key {
            Some(ca_key) => write!(
                f,
                "wrote {} (CA), {} (CA key, mode 0600: keep it to renew with --keep-ca), ",
                self.ca.display(),
                ca_key.display()
            )?,
            None => write!(f, "kept the CA {}; wrote ", self.ca.display())?,
        }
        write!(
            f,
            "{} (serving certificate), {} (private key, mode 0600)",
            self.cert.display(),
            self.key.display()
        )
    }
}

/// Writes `ca.crt` and `ca.key` (for a new CA), `tls.key` and `tls.crt` into `dir` (created
/// when missing).
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
        ca_key: bundle.ca_key_pem.as_ref().map(|_| dir.join(CA_KEY_FILE)),
    };
    if let (Some(path), Some(pem)) = (&written.ca_key, &bundle.ca_key_pem) {
        replace_file(path, pem.as_bytes(), 0o600)?;
        replace_file(&written.ca, bundle.ca_pem.as_bytes(), 0o644)?;
    }
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
    fn renewal_signs_with_the_kept_ca_and_leaves_it_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = generate(&request(30)).expect("generate");
        let written = write_files(dir.path(), &first).expect("write");
        let ca_key = written.ca_key.expect("a new CA's key is written");
        let mode = std::fs::metadata(&ca_key)
            .expect("ca.key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let ca_key_pem = std::fs::read_to_string(&ca_key).expect("ca.key");
        assert_eq!(
            refuse_existing_ca(dir.path()).map_err(|e| e.to_string()),
            Err(format!(
                "{} already holds a CA: a new one breaks the caBundle the apiserver trusts until it \
             is patched again. --keep-ca signs a new serving certificate with it; --force makes \
             a new CA (then rotate the caBundle as certs/README.md says)",
                dir.path().join(CA_FILE).display()
            ))
        );

        let renewed = renew(&request(30), dir.path()).expect("renew");
        assert_eq!(renewed.ca_pem, first.ca_pem);
        assert_eq!(renewed.ca_bundle(), first.ca_bundle());
        assert!(renewed.ca_key_pem.is_none());
        assert_ne!(renewed.cert_pem, first.cert_pem);
        assert_ne!(renewed.key_pem, first.key_pem);
        verify(
            &first.ca_pem,
            &renewed.cert_pem,
            "placement-webhook.flink-system.svc",
        )
        .expect("the new certificate chains to the kept CA");
        let written = write_files(dir.path(), &renewed).expect("write");
        assert_eq!(written.ca_key, None);
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).expect("file");
        assert_eq!(read(CA_FILE), first.ca_pem);
        assert_eq!(read(CA_KEY_FILE), ca_key_pem);
        assert_eq!(read(CERT_FILE), renewed.cert_pem);
        assert_eq!(read(KEY_FILE), renewed.key_pem);
        assert!(written.to_string().starts_with("kept the CA "), "{written}");

        // The new certificate ends no later than the CA.
        let long = renew(&request(3650), dir.path()).expect("renew");
        let end = |pem: &str| {
            let der = der(pem);
            let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("X.509");
            cert.validity().not_after.timestamp()
        };
        assert_eq!(end(&long.cert_pem), end(&first.ca_pem));
    }

    #[test]
    fn renewal_without_the_cas_key_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            renew(&request(30), dir.path()),
            Err(CertsError::Read { .. })
        ));
        let first = generate(&request(30)).expect("generate");
        write_files(dir.path(), &first).expect("write");
        std::fs::remove_file(dir.path().join(CA_KEY_FILE)).expect("remove ca.key");
        let err = renew(&request(30), dir.path()).expect_err("no key");
        assert!(matches!(err, CertsError::NoCaKey { .. }), "{err}");
        assert!(err.to_string().contains("--force"), "{err}");
        std::fs::write(dir.path().join(CA_KEY_FILE), "not a key").expect("write");
        let err = renew(&request(30), dir.path()).expect_err("a bad key");
        assert!(matches!(err, CertsError::BadCa { .. }), "{err}");
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
        assert_eq!(names, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
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

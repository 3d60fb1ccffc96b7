//! TLS for the HTTPS listener: certificate loading, optional client-certificate checks and
//! hot reload of the served certificate.
//!
//! The served certificate lives in an `ArcSwap` read by a custom resolver on every handshake,
//! so a reload reaches new connections without rebuilding the acceptor and without touching
//! open ones.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::version::{TLS12, TLS13};
use rustls::{InconsistentKeys, RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::time::MissedTickBehavior;
use tracing::{debug, info, warn};

/// TLS 1.0/1.1 are deliberately absent (rustls cannot speak them anyway).
const PROTOCOL_VERSIONS: &[&SupportedProtocolVersion] = &[&TLS13, &TLS12];

/// The apiserver calls webhooks over HTTP/1.1 only.
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Names the self-signed certificate is valid for: local use only.
const SELF_SIGNED_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Why a certificate, key or client CA could not be loaded.
///
/// Messages name the offending file and include the underlying cause, because they end up
/// verbatim in logs.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("cannot read {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("no PEM certificate found in {}", path.display())]
    NoCertificate { path: PathBuf },
    #[error("invalid PEM certificate in {}: {error}", path.display())]
    CertPem {
        path: PathBuf,
        error: rustls_pki_types::pem::Error,
    },
    #[error("certificate #{index} in {} is not a valid X.509 certificate", path.display())]
    NotX509 { path: PathBuf, index: usize },
    #[error("no usable private key (PKCS#8, PKCS#1 or SEC1 PEM) in {}: {error}", path.display())]
    KeyPem {
        path: PathBuf,
        error: rustls_pki_types::pem::Error,
    },
    #[error("unsupported private key in {}: {error}", path.display())]
    UnsupportedKey { path: PathBuf, error: rustls::Error },
    #[error("private key {} does not match the certificate in {}", key.display(), cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("invalid client CA file {}: {reason}", path.display())]
    ClientCa { path: PathBuf, reason: String },
    #[error("cannot generate a self-signed certificate: {0}")]
    SelfSigned(rcgen::Error),
    #[error("cannot build the TLS configuration: {0}")]
    Config(rustls::Error),
}

/// Where the served certificate comes from.
#[derive(Debug, Clone)]
pub(crate) enum CertSource {
    /// PEM files, re-read by [`ServerTls::reload`]. `cert` may hold the leaf followed by
    /// intermediates.
    Files { cert: PathBuf, key: PathBuf },
    /// A fresh in-memory certificate for localhost; for local runs and tests only.
    SelfSigned,
}

/// TLS state of the server: the rustls config plus the swappable certificate.
pub struct ServerTls {
    config: Arc<ServerConfig>,
    current: Arc<ArcSwap<CertifiedKey>>,
    provider: Arc<CryptoProvider>,
    files: Option<CertFiles>,
    self_signed_pem: Option<String>,
}

struct CertFiles {
    cert: PathBuf,
    key: PathBuf,
    /// Bytes of the pair currently served; the lock also serialises concurrent reloads.
    served: Mutex<PairBytes>,
}

struct PairBytes {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print key material: only where the certificate comes from and which one it is.
        let info = self.current_info();
        f.debug_struct("ServerTls")
            .field("cert", &self.files.as_ref().map(|f| &f.cert))
            .field("key", &self.files.as_ref().map(|f| &f.key))
            .field("self_signed", &self.self_signed_pem.is_some())
            .field("serial", &info.serial)
            .field("not_after", &info.not_after)
            .finish()
    }
}

impl ServerTls {
    /// Loads the certificate (files, or a fresh in-memory self-signed one for
    /// localhost/127.0.0.1/::1).
    ///
    /// `client_ca`: when set, every client must present a certificate chaining to that CA.
    pub(crate) fn new(source: CertSource, client_ca: Option<&Path>) -> Result<Self, TlsError> {
        // Built explicitly: more than one rustls provider is linked into the binary, so the
        // process default is ambiguous.
        let provider = Arc::new(rustls::crypto::ring::default_provider());

        let (certified, files, self_signed_pem) = match source {
            CertSource::Files { cert, key } => {
                let (cert_bytes, key_bytes) = read_pair(&cert, &key)?;
                let certified = parse_pair(&cert, &cert_bytes, &key, &key_bytes, &provider)?;
                let info = cert_info(&certified);
                info!(
                    cert = %cert.display(),
                    key = %key.display(),
                    serial = %info.serial,
                    not_after = %info.not_after,
                    chain_len = certified.cert.len(),
                    "loaded TLS certificate"
                );
                let files = CertFiles {
                    cert,
                    key,
                    served: Mutex::new(PairBytes {
                        cert: cert_bytes,
                        key: key_bytes,
                    }),
                };
                (certified, Some(files), None)
            }
            CertSource::SelfSigned => {
                let (certified, pem) = self_signed(&provider)?;
                warn!(
                    names = ?SELF_SIGNED_NAMES,
                    "serving a self-signed TLS certificate: for local use only"
                );
                (certified, None, Some(pem))
            }
        };

        let verifier = client_ca
            .map(|path| client_verifier(path, &provider))
            .transpose()?;

        let current = Arc::new(ArcSwap::from_pointee(certified));
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(TlsError::Config)?;
        let builder = match verifier {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        // rustls never renegotiates (it answers a renegotiation request with a warning alert),
        // so there is nothing to switch off here; a cert swap only affects new handshakes.
        let mut config = builder.with_cert_resolver(Arc::new(CurrentCert(current.clone())));
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];

        Ok(Self {
            config: Arc::new(config),
            current,
            provider,
            files,
            self_signed_pem,
        })
    }

    /// An acceptor for the current configuration; cheap to clone, and it keeps seeing reloads.
    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }

    /// Re-reads the certificate files by path and swaps the served certificate when their bytes
    /// changed and the new pair is valid. Returns whether it swapped.
    ///
    /// A bad pair keeps the old certificate and returns the error. Self-signed mode never
    /// reloads.
    pub(crate) fn reload(&self) -> Result<bool, TlsError> {
        let Some(files) = &self.files else {
            return Ok(false);
        };
        // A poisoned lock means an earlier reload panicked; at worst the recorded bytes are
        // stale, which only costs one extra parse.
        let mut served = files.served.lock().unwrap_or_else(PoisonError::into_inner);
        let (cert_bytes, key_bytes) = read_pair(&files.cert, &files.key)?;
        if cert_bytes == served.cert && key_bytes == served.key {
            return Ok(false);
        }
        let certified = parse_pair(
            &files.cert,
            &cert_bytes,
            &files.key,
            &key_bytes,
            &self.provider,
        )?;
        self.current.store(Arc::new(certified));
        *served = PairBytes {
            cert: cert_bytes,
            key: key_bytes,
        };
        Ok(true)
    }

    /// Calls [`reload`](Self::reload) every `every` until `shutdown` resolves. Logs each change
    /// once, and each distinct error once until it changes or clears.
    pub(crate) fn spawn_reloader(
        self: Arc<Self>,
        every: Duration,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            if self.files.is_none() {
                return;
            }
            // `interval` panics on zero; a tiny floor avoids that without a busy loop.
            let mut ticker = tokio::time::interval(every.max(Duration::from_millis(10)));
            ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
            // The first tick fires at once, and `new` has just loaded the files.
            ticker.tick().await;
            let mut shutdown = std::pin::pin!(shutdown);
            let mut last_error: Option<String> = None;
            loop {
                tokio::select! {
                    () = &mut shutdown => break,
                    _ = ticker.tick() => {}
                }
                let this = self.clone();
                // File reads block; keep them off the runtime's worker threads.
                let outcome = match tokio::task::spawn_blocking(move || this.reload()).await {
                    Ok(outcome) => outcome,
                    Err(e) => {
                        warn!(error = %e, "certificate reload task failed");
                        continue;
                    }
                };
                match outcome {
                    Ok(true) => {
                        last_error = None;
                        let info = self.current_info();
                        info!(
                            serial = %info.serial,
                            not_after = %info.not_after,
                            "certificate reloaded"
                        );
                    }
                    Ok(false) => {
                        if last_error.take().is_some() {
                            info!(
                                "certificate files are valid again; serving certificate unchanged"
                            );
                        }
                    }
                    Err(e) => {
                        let message = e.to_string();
                        if last_error.as_deref() != Some(message.as_str()) {
                            warn!(
                                error = %message,
                                "certificate reload failed; still serving the previous certificate"
                            );
                            last_error = Some(message);
                        }
                    }
                }
            }
            debug!("certificate reloader stopped");
        })
    }

    /// A client configuration for talking to the other replicas: it trusts exactly the
    /// certificate this server serves at the moment of each handshake (every replica mounts the
    /// same Secret), so no name or CA needs to be known, and a peer proves it holds the key.
    pub(crate) fn peer_client_config(&self) -> Result<rustls::ClientConfig, TlsError> {
        let verifier = SameCertificate {
            current: self.current.clone(),
            provider: self.provider.clone(),
        };
        let mut config = rustls::ClientConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(PROTOCOL_VERSIONS)
            .map_err(TlsError::Config)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
        Ok(config)
    }

    /// The PEM of the generated certificate in [`CertSource::SelfSigned`] mode, for clients
    /// that need to trust it.
    pub fn self_signed_cert_pem(&self) -> Option<String> {
        self.self_signed_pem.clone()
    }

    fn current_info(&self) -> CertInfo {
        cert_info(&self.current.load())
    }
}

/// Hands every handshake whatever certificate is current at that moment.
struct CurrentCert(Arc<ArcSwap<CertifiedKey>>);

impl fmt::Debug for CurrentCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CurrentCert")
            .field("serial", &cert_info(&self.0.load()).serial)
            .finish()
    }
}

impl ResolvesServerCert for CurrentCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// Accepts a server whose leaf certificate is the one this replica serves, byte for byte; the
/// handshake signature is checked as usual, so the peer holds the same key.
#[derive(Debug)]
struct SameCertificate {
    current: Arc<ArcSwap<CertifiedKey>>,
    provider: Arc<CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for SameCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let current = self.current.load();
        if current.cert.first() == Some(end_entity) {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Reads the cert and key files by path.
///
/// Kubernetes Secret volumes rotate by swapping the `..data` symlink atomically, but two
/// separate reads can straddle a swap and pair an old cert with a new key. Reading the cert
/// again after the key detects that; a few retries settle it.
fn read_pair(cert: &Path, key: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let mut attempts = 0;
    loop {
        let before = read_file(cert)?;
        let key_bytes = read_file(key)?;
        let after = read_file(cert)?;
        attempts += 1;
        if before == after || attempts >= 3 {
            return Ok((after, key_bytes));
        }
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        path: path.to_path_buf(),
        error,
    })
}

/// Parses a PEM chain and key and checks that the key belongs to the leaf.
fn parse_pair(
    cert_path: &Path,
    cert_pem: &[u8],
    key_path: &Path,
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::CertPem {
            path: cert_path.to_path_buf(),
            error,
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_path_buf(),
        });
    }
    // rustls would only notice broken DER during a handshake; catch it at load time instead.
    if let Some(index) = chain.iter().position(|c| !is_x509(c)) {
        return Err(TlsError::NotX509 {
            path: cert_path.to_path_buf(),
            index,
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|error| TlsError::KeyPem {
        path: key_path.to_path_buf(),
        error,
    })?;
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(|error| TlsError::UnsupportedKey {
            path: key_path.to_path_buf(),
            error,
        })?;
    let certified = CertifiedKey::new(chain, signer);
    match certified.keys_match() {
        // Unknown: the key type cannot report its public key, so there is nothing to compare.
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(certified),
        Err(_) => Err(TlsError::KeyMismatch {
            cert: cert_path.to_path_buf(),
            key: key_path.to_path_buf(),
        }),
    }
}

fn self_signed(provider: &CryptoProvider) -> Result<(CertifiedKey, String), TlsError> {
    let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|s| s.to_string()).collect();
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(names).map_err(TlsError::SelfSigned)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(signing_key.serialize_der()));
    let signer = provider
        .key_provider
        .load_private_key(key)
        .map_err(TlsError::Config)?;
    Ok((
        CertifiedKey::new(vec![cert.der().clone()], signer),
        cert.pem(),
    ))
}

fn client_verifier(
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let invalid = |reason: String| TlsError::ClientCa {
        path: path.to_path_buf(),
        reason,
    };
    let pem = read_file(path)?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| invalid(format!("invalid PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| invalid(format!("unusable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(invalid("no PEM certificate found".to_string()));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid(e.to_string()))
}

/// What the logs say about a certificate.
struct CertInfo {
    serial: String,
    not_after: String,
}

fn cert_info(certified: &CertifiedKey) -> CertInfo {
    let parsed = certified
        .cert
        .first()
        .and_then(|c| x509_parser::parse_x509_certificate(c).ok());
    match parsed {
        Some((_, cert)) => CertInfo {
            serial: serial_hex(cert.raw_serial()),
            not_after: rfc3339(cert.validity().not_after.timestamp()),
        },
        None => CertInfo {
            serial: "unknown".to_string(),
            not_after: "unknown".to_string(),
        },
    }
}

/// Lower-case hex without the sign-padding zero byte, like `openssl x509 -serial`.
fn serial_hex(serial: &[u8]) -> String {
    let bytes = match serial {
        [0, rest @ ..] if !rest.is_empty() => rest,
        all => all,
    };
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn rfc3339(unix_seconds: i64) -> String {
    u64::try_from(unix_seconds)
        .ok()
        .and_then(|s| std::time::UNIX_EPOCH.checked_add(Duration::from_secs(s)))
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_else(|| unix_seconds.to_string())
}

/// A PEM block that is not an X.509 certificate is rejected at load, not at the first handshake.
fn is_x509(der: &[u8]) -> bool {
    x509_parser::parse_x509_certificate(der).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::symlink;

    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose, SerialNumber,
    };
    use rustls::ClientConfig;
    use rustls_pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    const SERVER_NAME: &str = "webhook.test";

    struct Ca {
        issuer: Issuer<'static, KeyPair>,
        der: CertificateDer<'static>,
        pem: String,
    }

    fn ca(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            der: cert.der().clone(),
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn intermediate(parent: &Ca, name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &parent.issuer).unwrap();
        Ca {
            der: cert.der().clone(),
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    struct Leaf {
        der: CertificateDer<'static>,
        cert_pem: String,
        key: KeyPair,
    }

    impl Leaf {
        fn key_pem(&self) -> String {
            self.key.serialize_pem()
        }
    }

    fn leaf(ca: &Ca, serial: u8, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let mut params = CertificateParams::new(vec![SERVER_NAME.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "leaf");
        params.serial_number = Some(SerialNumber::from_slice(&[0x10, serial]));
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &ca.issuer).unwrap();
        Leaf {
            der: cert.der().clone(),
            cert_pem: cert.pem(),
            key,
        }
    }

    fn server_leaf(ca: &Ca, serial: u8) -> Leaf {
        leaf(ca, serial, ExtendedKeyUsagePurpose::ServerAuth)
    }

    fn write_pair(dir: &Path, cert_pem: &str, key_pem: &str) -> (PathBuf, PathBuf) {
        let cert = dir.join("tls.crt");
        let key = dir.join("tls.key");
        std::fs::write(&cert, cert_pem).unwrap();
        std::fs::write(&key, key_pem).unwrap();
        (cert, key)
    }

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    fn client_builder(
        versions: &[&'static SupportedProtocolVersion],
        root_der: &CertificateDer<'static>,
    ) -> rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert> {
        let mut roots = RootCertStore::empty();
        roots.add(root_der.clone()).unwrap();
        ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots)
    }

    fn client(root_der: &CertificateDer<'static>) -> Arc<ClientConfig> {
        let mut config = client_builder(PROTOCOL_VERSIONS, root_der).with_no_client_auth();
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
        Arc::new(config)
    }

    /// What the client saw on a successful connection.
    #[derive(Debug)]
    struct Seen {
        leaf: CertificateDer<'static>,
        chain_len: usize,
        alpn: Option<Vec<u8>>,
        version: Option<rustls::ProtocolVersion>,
    }

    /// One connection: the server writes "ok" after its handshake, the client reads it.
    /// Returns the client's view and the server's handshake outcome.
    async fn exchange(
        tls: &ServerTls,
        client: Arc<ClientConfig>,
        name: &str,
    ) -> (std::io::Result<Seen>, std::io::Result<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tls.acceptor();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await?;
            let mut stream = acceptor.accept(tcp).await?;
            stream.write_all(b"ok").await?;
            stream.shutdown().await?;
            Ok::<_, std::io::Error>(())
        });
        let name = ServerName::try_from(name.to_string()).unwrap();
        let seen = async {
            let tcp = TcpStream::connect(addr).await?;
            let mut stream = tokio_rustls::TlsConnector::from(client)
                .connect(name, tcp)
                .await?;
            let (_, conn) = stream.get_ref();
            let chain = conn.peer_certificates().unwrap_or_default();
            let seen = Seen {
                leaf: chain[0].clone().into_owned(),
                chain_len: chain.len(),
                alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
                version: conn.protocol_version(),
            };
            let mut body = Vec::new();
            stream.read_to_end(&mut body).await?;
            assert_eq!(body, b"ok");
            Ok(seen)
        }
        .await;
        let served = server.await.unwrap();
        (seen, served)
    }

    #[tokio::test]
    async fn handshake_negotiates_http11() {
        let root = ca("root");
        let leaf = server_leaf(&root, 1);
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), &leaf.cert_pem, &leaf.key_pem());
        let tls = ServerTls::new(CertSource::Files { cert, key }, None).unwrap();

        let (seen, served) = exchange(&tls, client(&root.der), SERVER_NAME).await;
        let seen = seen.unwrap();
        served.unwrap();
        assert_eq!(seen.alpn.as_deref(), Some(ALPN_HTTP11));
        assert_eq!(seen.leaf, leaf.der);
        assert_eq!(tls.self_signed_cert_pem(), None);
        let info = tls.current_info();
        assert_eq!(info.serial, "1001");
        // rcgen's default validity end.
        assert_eq!(info.not_after, "4096-01-01T00:00:00Z");
    }

    #[tokio::test]
    async fn only_tls12_and_tls13_are_enabled() {
        let versions: Vec<_> = PROTOCOL_VERSIONS.iter().map(|v| v.version).collect();
        assert_eq!(
            versions,
            [
                rustls::ProtocolVersion::TLSv1_3,
                rustls::ProtocolVersion::TLSv1_2
            ]
        );
        let root = ca("root");
        let leaf = server_leaf(&root, 1);
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), &leaf.cert_pem, &leaf.key_pem());
        let tls = ServerTls::new(CertSource::Files { cert, key }, None).unwrap();
        assert_eq!(tls.config.alpn_protocols, vec![ALPN_HTTP11.to_vec()]);

        for (version, expected) in [
            (&TLS12, rustls::ProtocolVersion::TLSv1_2),
            (&TLS13, rustls::ProtocolVersion::TLSv1_3),
        ] {
            let config = Arc::new(client_builder(&[version], &root.der).with_no_client_auth());
            let (seen, served) = exchange(&tls, config, SERVER_NAME).await;
            served.unwrap();
            assert_eq!(seen.unwrap().version, Some(expected));
        }
    }

    #[tokio::test]
    async fn client_offering_only_h2_is_refused() {
        let root = ca("root");
        let leaf = server_leaf(&root, 1);
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), &leaf.cert_pem, &leaf.key_pem());
        let tls = ServerTls::new(CertSource::Files { cert, key }, None).unwrap();

        let mut config = client_builder(PROTOCOL_VERSIONS, &root.der).with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let (seen, served) = exchange(&tls, Arc::new(config), SERVER_NAME).await;
        assert!(seen.is_err());
        assert!(served.is_err());
    }

    #[tokio::test]
    async fn chain_is_served_with_the_leaf() {
        let root = ca("root");
        let mid = intermediate(&root, "intermediate");
        let leaf = server_leaf(&mid, 7);
        let dir = tempfile::tempdir().unwrap();
        let chain_pem = format!("{}{}", leaf.cert_pem, mid.pem);
        let (cert, key) = write_pair(dir.path(), &chain_pem, &leaf.key_pem());
        let tls = ServerTls::new(CertSource::Files { cert, key }, None).unwrap();

        // The client trusts only the root, so it needs the intermediate from the server.
        let (seen, served) = exchange(&tls, client(&root.der), SERVER_NAME).await;
        served.unwrap();
        let seen = seen.unwrap();
        assert_eq!(seen.leaf, leaf.der);
        assert_eq!(seen.chain_len, 2);
    }

    #[tokio::test]
    async fn sec1_key_is_accepted() {
        let root = ca("root");
        let leaf = server_leaf(&root, 1);
        // rcgen writes PKCS#8; its inner ECPrivateKey is the SEC1 encoding.
        let pkcs8 = leaf.key.serialize_der();
        let (_, info) = x509_parser::der_parser::parse_der(&pkcs8).unwrap();
        let sec1 = info.as_sequence().unwrap()[2].as_slice().unwrap();
        let sec1_pem = pem_encode("EC PRIVATE KEY", sec1);
        assert!(matches!(
            PrivateKeyDer::from_pem_slice(sec1_pem.as_bytes()),
            Ok(PrivateKeyDer::Sec1(_))
        ));

        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), &leaf.cert_pem, &sec1_pem);
        let tls = ServerTls::new(CertSource::Files { cert, key }, None).unwrap();
        let (seen, served) = exchange(&tls, client(&root.der), SERVER_NAME).await;
        served.unwrap();
        assert_eq!(seen.unwrap().leaf, leaf.der);
    }

    fn pem_encode(label: &str, der: &[u8]) -> String {
        use base64::Engine;
        let body = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }

    #[tokio::test]
    async fn reload_picks_up_rewritten_files() {
        let root = ca("root");
        let first = server_leaf(&root, 1);
        let second = server_leaf(&root, 2);
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), &first.cert_pem, &first.key_pem());
        let tls = ServerTls::new(CertSource::Files { cert, key }, None).unwrap();
        assert!(!tls.reload().unwrap(), "unchanged files must not swap");

        write_pair(dir.path(), &second.cert_pem, &second.key_pem());
        assert!(tls.reload().unwrap());
        assert!(!tls.reload().unwrap());

        let (seen, served) = exchange(&tls, client(&root.der), SERVER_NAME).await;
        served.unwrap();
        assert_eq!(seen.unwrap().leaf, second.der);
        assert_eq!(tls.current_info().serial, "1002");
    }

    #[tokio::test]
    async fn reload_follows_secret_volume_symlink_swap() {
        let root = ca("root");
        let first = server_leaf(&root, 1);
        let second = server_leaf(&root, 2);
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();

        // The layout kubelet writes for a Secret volume.
        let v1 = base.join("..2026_11_22_10_00_00.0001");
        std::fs::create_dir(&v1).unwrap();
        write_pair(&v1, &first.cert_pem, &first.key_pem());
        symlink("..2026_11_22_10_00_00.0001", base.join("..data")).unwrap();
        symlink("..data/tls.crt", base.join("tls.crt")).unwrap();
        symlink("..data/tls.key", base.join("tls.key")).unwrap();

        let tls = ServerTls::new(
            CertSource::Files {
                cert: base.join("tls.crt"),
                key: base.join("tls.key"),
            },
            None,
        )
        .unwrap();
        let (seen, _) = exchange(&tls, client(&root.der), SERVER_NAME).await;
        assert_eq!(seen.unwrap().leaf, first.der);

        // Rotation: new timestamped dir, then an atomic rename of a fresh symlink over `..data`.
        let v2 = base.join("..2026_11_22_11_00_00.0002");
        std::fs::create_dir(&v2).unwrap();
        write_pair(&v2, &second.cert_pem, &second.key_pem());
        symlink("..2026_11_22_11_00_00.0002", base.join("..data_tmp")).unwrap();
        std::fs::rename(base.join("..data_tmp"), base.join("..data")).unwrap();
        std::fs::remove_dir_all(&v1).unwrap();

        assert!(tls.reload().unwrap());
        let (seen, served) = exchange(&tls, client(&root.der), SERVER_NAME).await;
        served.unwrap();
        assert_eq!(seen.unwrap().leaf, second.der);
    }

    #[tokio::test]
    async fn reloader_task_applies_rotation_and_stops() {
        let root = ca("root");
        let first = server_leaf(&root, 1);
        let second = server_leaf(&root, 2);
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), &first.cert_pem, &first.key_pem());
        let tls = Arc::new(ServerTls::new(CertSource::Files { cert, key }, None).unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tls
            .clone()
            .spawn_reloader(Duration::from_millis(20), async {
                let _ = stopped.await;
            });

        write_pair(dir.path(), &second.cert_pem, &second.key_pem());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while tls.current.load().cert[0] != second.der {
            assert!(
                tokio::time::Instant::now() < deadline,
                "reloader never swapped"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test]
    async fn broken_key_keeps_the_old_certificate() {
        let root = ca("root");
        let first = server_leaf(&root, 1);
        let second = server_leaf(&root, 2);
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), &first.cert_pem, &first.key_pem());
        let tls = ServerTls::new(
            CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            None,
        )
        .unwrap();

        write_pair(dir.path(), &second.cert_pem, "not a key\n");
        let err = tls.reload().unwrap_err();
        assert!(matches!(err, TlsError::KeyPem { .. }), "{err}");
        assert!(err.to_string().contains(&key.display().to_string()));

        // A valid key that belongs to another certificate.
        write_pair(dir.path(), &second.cert_pem, &first.key_pem());
        let err = tls.reload().unwrap_err();
        assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err}");
        assert!(err.to_string().contains(&cert.display().to_string()));

        let (seen, served) = exchange(&tls, client(&root.der), SERVER_NAME).await;
        served.unwrap();
        assert_eq!(seen.unwrap().leaf, first.der);

        // Once the files are fixed the reload goes through.
        write_pair(dir.path(), &second.cert_pem, &second.key_pem());
        assert!(tls.reload().unwrap());
    }

    #[test]
    fn bad_files_are_rejected_at_startup() {
        let root = ca("root");
        let first = server_leaf(&root, 1);
        let second = server_leaf(&root, 2);
        let dir = tempfile::tempdir().unwrap();

        let (cert, key) = write_pair(dir.path(), &first.cert_pem, &second.key_pem());
        let err = ServerTls::new(CertSource::Files { cert, key }, None).unwrap_err();
        assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err}");

        let (cert, key) = write_pair(dir.path(), "", &first.key_pem());
        let err = ServerTls::new(CertSource::Files { cert, key }, None).unwrap_err();
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err}");

        let garbage = pem_encode("CERTIFICATE", b"definitely not DER");
        let (cert, key) = write_pair(dir.path(), &garbage, &first.key_pem());
        let err = ServerTls::new(CertSource::Files { cert, key }, None).unwrap_err();
        assert!(matches!(err, TlsError::NotX509 { index: 0, .. }), "{err}");

        let missing = dir.path().join("missing.crt");
        let err = ServerTls::new(
            CertSource::Files {
                cert: missing.clone(),
                key: dir.path().join("tls.key"),
            },
            None,
        )
        .unwrap_err();
        assert!(matches!(err, TlsError::Read { .. }), "{err}");
        assert!(err.to_string().contains(&missing.display().to_string()));
    }

    #[tokio::test]
    async fn client_ca_requires_a_client_certificate() {
        let server_root = ca("server root");
        let client_root = ca("client root");
        let leaf = server_leaf(&server_root, 1);
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), &leaf.cert_pem, &leaf.key_pem());
        let ca_path = dir.path().join("client-ca.crt");
        std::fs::write(&ca_path, &client_root.pem).unwrap();
        let tls = ServerTls::new(CertSource::Files { cert, key }, Some(&ca_path)).unwrap();

        let (seen, served) = exchange(&tls, client(&server_root.der), SERVER_NAME).await;
        assert!(seen.is_err(), "client without a certificate got through");
        assert!(served.is_err());

        // A certificate from some other CA is refused as well.
        let stranger = leaf_for_client(&ca("stranger"));
        let config = client_builder(PROTOCOL_VERSIONS, &server_root.der)
            .with_client_auth_cert(vec![stranger.der.clone()], key_der(&stranger))
            .unwrap();
        let (seen, served) = exchange(&tls, Arc::new(config), SERVER_NAME).await;
        assert!(seen.is_err());
        assert!(served.is_err());

        let good = leaf_for_client(&client_root);
        let config = client_builder(PROTOCOL_VERSIONS, &server_root.der)
            .with_client_auth_cert(vec![good.der.clone()], key_der(&good))
            .unwrap();
        let (seen, served) = exchange(&tls, Arc::new(config), SERVER_NAME).await;
        served.unwrap();
        assert_eq!(seen.unwrap().leaf, leaf.der);
    }

    fn leaf_for_client(ca: &Ca) -> Leaf {
        leaf(ca, 9, ExtendedKeyUsagePurpose::ClientAuth)
    }

    fn key_der(leaf: &Leaf) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf.key.serialize_der()))
    }

    #[test]
    fn bad_client_ca_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let ca_path = dir.path().join("client-ca.crt");
        std::fs::write(&ca_path, "nothing here\n").unwrap();
        let err = ServerTls::new(CertSource::SelfSigned, Some(&ca_path)).unwrap_err();
        assert!(matches!(err, TlsError::ClientCa { .. }), "{err}");
        assert!(err.to_string().contains(&ca_path.display().to_string()));
    }

    #[tokio::test]
    async fn self_signed_serves_localhost() {
        let tls = ServerTls::new(CertSource::SelfSigned, None).unwrap();
        let pem = tls.self_signed_cert_pem().unwrap();
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        assert!(!tls.reload().unwrap());

        let (seen, served) = exchange(&tls, client(&der), "localhost").await;
        served.unwrap();
        let seen = seen.unwrap();
        assert_eq!(seen.leaf, der);
        assert_eq!(seen.alpn.as_deref(), Some(ALPN_HTTP11));

        // Two servers never share a key pair.
        let other = ServerTls::new(CertSource::SelfSigned, None).unwrap();
        assert_ne!(other.self_signed_cert_pem(), Some(pem));
    }
}

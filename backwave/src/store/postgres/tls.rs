//! TLS to the server, as libpq reads it from the URL: `sslmode` (`disable`, `prefer` — the
//! default —, `require`, `verify-ca`, `verify-full`) and `sslrootcert=FILE` (else the system's
//! root certificates). Built on rustls (pure Rust: no system OpenSSL to build or ship). This
//! file owns reading the two keys, the crypto provider, the certificate checks each mode makes,
//! and the message when a server's certificate is refused.

use std::path::PathBuf;
use std::sync::Arc;

use postgres::config::Host;
use postgres::Config;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, GetRandomFailed, KeyProvider, SecureRandom,
    WebPkiSupportedAlgorithms,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::sign::SigningKey;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Error, Result};

/// How much the client checks, libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Disable,
    /// TLS when the server offers it, unchecked; plain otherwise. libpq's default.
    Prefer,
    /// TLS or no connection; the certificate is not checked (unless `sslrootcert` is given,
    /// which makes it `verify-ca`, as in libpq).
    Require,
    /// TLS with a certificate signed by a trusted CA, for any host name.
    VerifyCa,
    /// As `verify-ca`, and the certificate names the host connected to.
    VerifyFull,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS part of a URL, read before the `postgres` crate parses the rest (it knows only
/// `disable`, `prefer` and `require`, and no `sslrootcert`).
#[derive(Clone, Debug)]
pub(super) struct TlsSettings {
    mode: Mode,
    root_cert: Option<PathBuf>,
}

/// What the connection is made with.
#[derive(Clone)]
pub(super) enum Connector {
    Plain,
    Tls(MakeRustlsConnect),
}

impl TlsSettings {
    /// Split `sslmode` and `sslrootcert` off the URL `raw`: the URL for `Config::from_str` (its
    /// `sslmode` one the crate knows), and the settings. `shown` is the URL as messages quote it.
    pub(super) fn from_url(raw: &str, shown: &str) -> Result<(String, TlsSettings)> {
        let (base, query) = match raw.split_once('?') {
            Some((b, q)) => (b, q),
            None => return Ok((raw.to_string(), TlsSettings { mode: Mode::Prefer, root_cert: None })),
        };
        let mut mode = Mode::Prefer;
        let mut root_cert = None;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => {
                    mode = match percent_decode(value).as_str() {
                        "disable" => Mode::Disable,
                        "prefer" => Mode::Prefer,
                        "require" => Mode::Require,
                        "verify-ca" => Mode::VerifyCa,
                        "verify-full" => Mode::VerifyFull,
                        other => {
                            return Err(Error::InvalidInput(format!(
                        "'{shown}': sslmode '{other}' is not one of disable, prefer, require, verify-ca, verify-full"
                    )))
                        }
                    }
                }
                "sslrootcert" => root_cert = Some(PathBuf::from(percent_decode(value))),
                _ => kept.push(pair),
            }
        }
        if mode == Mode::Require && root_cert.is_some() {
            mode = Mode::VerifyCa;
        }
        // Given to the crate so that it asks the server for TLS, and insists on it.
        kept.push(match mode {
            Mode::Disable => "sslmode=disable",
            Mode::Prefer => "sslmode=prefer",
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => "sslmode=require",
        });
        Ok((format!("{base}?{}", kept.join("&")), TlsSettings { mode, root_cert }))
    }

    /// The connector for `config`: plain for `disable` and for `prefer` over unix sockets only
    /// (the server offers no TLS there, as libpq knows), else rustls checking what the mode asks.
    pub(super) fn connector(&self, config: &Config, shown: &str) -> Result<Connector> {
        let sockets_only = config.get_hosts().iter().all(|h| matches!(h, Host::Unix(_)));
        if self.mode == Mode::Disable || (self.mode == Mode::Prefer && sockets_only) {
            return Ok(Connector::Plain);
        }
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::InvalidInput(format!("TLS for '{shown}': {e}")))?;
        let chain = match self.mode {
            Mode::Disable | Mode::Prefer | Mode::Require => None,
            Mode::VerifyCa | Mode::VerifyFull => Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(self.roots(shown)?), Arc::clone(&provider))
                    .build()
                    .map_err(|e| Error::InvalidInput(format!("TLS for '{shown}': {e}")))?,
            ),
        };
        let verifier = Verifier { provider, chain, names: self.mode == Mode::VerifyFull };
        let config = builder.dangerous().with_custom_certificate_verifier(Arc::new(verifier)).with_no_client_auth();
        Ok(Connector::Tls(MakeRustlsConnect::new(config)))
    }

    /// The trusted CAs: the `sslrootcert` file, else the system's store.
    fn roots(&self, shown: &str) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        match &self.root_cert {
            Some(file) => {
                let bad =
                    |why: String| Error::InvalidInput(format!("'{shown}': sslrootcert '{}' {why}", file.display()));
                let pem = std::fs::read(file).map_err(|e| bad(format!("cannot be read: {e}")))?;
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<_, _>>()
                    .map_err(|e| bad(format!("is not PEM certificates: {e:?}")))?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(bad("holds no CA certificate".into()));
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(Error::InvalidInput(format!(
                        "'{shown}': sslmode={} found no system root certificates; give the server's CA with sslrootcert=FILE",
                        self.mode.name()
                    )));
                }
            }
        }
        Ok(roots)
    }

    /// Why a connection failed, naming the mode when TLS refused it.
    pub(super) fn explain(&self, why: String) -> String {
        if !why.contains("TLS") && !why.contains("certificate") {
            return why;
        }
        let trusted = match (&self.root_cert, self.mode) {
            (_, Mode::Disable | Mode::Prefer | Mode::Require) => String::new(),
            (Some(file), _) => format!(" (trusting the CA in '{}')", file.display()),
            (None, _) => " (trusting the system's root certificates)".to_string(),
        };
        format!("sslmode={}{trusted}: {why}", self.mode.name())
    }
}

/// `%XX` escapes decoded (the URL's shape was checked: each `%` has two hex digits).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The certificate check of every mode that uses TLS. The handshake's signatures are always
/// checked, with the certificate's key. `chain` `None` (`prefer`, `require`): the channel is
/// encrypted but anyone may be at the other end, as in libpq. Otherwise the chain must lead to
/// a trusted CA, and with `names` (`verify-full`) the certificate must name the host connected
/// to; without (`verify-ca`) the name in it is not compared.
#[derive(Debug)]
struct Verifier {
    provider: Arc<CryptoProvider>,
    chain: Option<Arc<WebPkiServerVerifier>>,
    names: bool,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.names => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// The crypto provider of every TLS connection: the process-wide default when the application
/// installed one (`CryptoProvider::install_default`, e.g. aws-lc-rs for post-quantum key exchange
/// or FIPS), else ring's. Never installs a default itself: that is the application's choice.
fn provider() -> Arc<CryptoProvider> {
    match CryptoProvider::get_default() {
        Some(installed) => Arc::clone(installed),
        None => Arc::new(ring_provider()),
    }
}

/// ring's suites, key exchange groups and signature algorithms: what
/// `rustls::crypto::ring::default_provider()` returns, assembled from the parts rustls and webpki
/// publish, since that function is deprecated from rustls 0.23.48 on (ring has no post-quantum
/// key exchange; an application that wants one installs aws-lc-rs as the default, above).
/// `ring_provider_is_rustls_own` compares the two.
fn ring_provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: rustls::crypto::ring::DEFAULT_CIPHER_SUITES.to_vec(),
        kx_groups: rustls::crypto::ring::DEFAULT_KX_GROUPS.to_vec(),
        signature_verification_algorithms: RING_SIGNATURES,
        secure_random: &Ring,
        key_provider: &Ring,
    }
}

/// rustls's table for ring (`crypto/ring/mod.rs`, `SUPPORTED_SIG_ALGS`), which it does not export.
static RING_SIGNATURES: WebPkiSupportedAlgorithms = {
    use webpki::ring as alg;
    WebPkiSupportedAlgorithms {
        all: &[
            alg::ECDSA_P256_SHA256,
            alg::ECDSA_P256_SHA384,
            alg::ECDSA_P384_SHA256,
            alg::ECDSA_P384_SHA384,
            alg::ED25519,
            alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
            alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
            alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
            alg::RSA_PKCS1_2048_8192_SHA256,
            alg::RSA_PKCS1_2048_8192_SHA384,
            alg::RSA_PKCS1_2048_8192_SHA512,
            alg::RSA_PKCS1_2048_8192_SHA256_ABSENT_PARAMS,
            alg::RSA_PKCS1_2048_8192_SHA384_ABSENT_PARAMS,
            alg::RSA_PKCS1_2048_8192_SHA512_ABSENT_PARAMS,
        ],
        mapping: &[
            // For TLS 1.2 the curve is not fixed by the scheme; for TLS 1.3 it is.
            (SignatureScheme::ECDSA_NISTP384_SHA384, &[alg::ECDSA_P384_SHA384, alg::ECDSA_P256_SHA384]),
            (SignatureScheme::ECDSA_NISTP256_SHA256, &[alg::ECDSA_P256_SHA256, alg::ECDSA_P384_SHA256]),
            (SignatureScheme::ED25519, &[alg::ED25519]),
            (SignatureScheme::RSA_PSS_SHA512, &[alg::RSA_PSS_2048_8192_SHA512_LEGACY_KEY]),
            (SignatureScheme::RSA_PSS_SHA384, &[alg::RSA_PSS_2048_8192_SHA384_LEGACY_KEY]),
            (SignatureScheme::RSA_PSS_SHA256, &[alg::RSA_PSS_2048_8192_SHA256_LEGACY_KEY]),
            (SignatureScheme::RSA_PKCS1_SHA512, &[alg::RSA_PKCS1_2048_8192_SHA512]),
            (SignatureScheme::RSA_PKCS1_SHA384, &[alg::RSA_PKCS1_2048_8192_SHA384]),
            (SignatureScheme::RSA_PKCS1_SHA256, &[alg::RSA_PKCS1_2048_8192_SHA256]),
        ],
    }
};

/// ring's random numbers, and its keys for a client certificate (none is sent today).
#[derive(Debug)]
struct Ring;

impl SecureRandom for Ring {
    fn fill(&self, buf: &mut [u8]) -> std::result::Result<(), GetRandomFailed> {
        use ring::rand::SecureRandom as _;
        ring::rand::SystemRandom::new().fill(buf).map_err(|_| GetRandomFailed)
    }
}

impl KeyProvider for Ring {
    fn load_private_key(
        &self,
        key_der: PrivateKeyDer<'static>,
    ) -> std::result::Result<Arc<dyn SigningKey>, rustls::Error> {
        rustls::crypto::ring::sign::any_supported_type(&key_der)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_read_off_the_url_and_the_rest_kept() {
        let (url, s) = TlsSettings::from_url(
            "postgres://h/db?user=u&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&x=1",
            "shown",
        )
        .unwrap();
        assert_eq!(url, "postgres://h/db?user=u&x=1&sslmode=require");
        assert_eq!(s.mode, Mode::VerifyFull);
        assert_eq!(s.root_cert.as_deref(), Some(Path::new("/tmp/ca.pem")));

        let (url, s) = TlsSettings::from_url("postgres://h/db", "shown").unwrap();
        assert_eq!((url.as_str(), s.mode), ("postgres://h/db", Mode::Prefer));
        let (url, s) = TlsSettings::from_url("postgres://h/db?sslmode=disable", "shown").unwrap();
        assert_eq!((url.as_str(), s.mode), ("postgres://h/db?sslmode=disable", Mode::Disable));
        // libpq: `require` with a root certificate checks the chain, as verify-ca.
        let (_, s) = TlsSettings::from_url("postgres://h/db?sslmode=require&sslrootcert=ca.pem", "shown").unwrap();
        assert_eq!(s.mode, Mode::VerifyCa);

        let e = TlsSettings::from_url("postgres://h/db?sslmode=verify-everything", "postgres://h/db?…").unwrap_err();
        assert_eq!(
            e.to_string(),
            "'postgres://h/db?…': sslmode 'verify-everything' is not one of disable, prefer, require, verify-ca, verify-full"
        );
    }

    #[test]
    fn a_root_certificate_file_that_is_missing_or_not_pem_is_one_line_naming_it() {
        let dir = tempfile_dir();
        let missing = dir.join("nope.pem");
        let url = format!("postgres://127.0.0.1/db?sslmode=verify-full&sslrootcert={}", missing.display());
        let (raw, s) = TlsSettings::from_url(&url, "shown").unwrap();
        let config: Config = raw.parse().unwrap();
        let e = s.connector(&config, "shown").err().unwrap();
        assert!(
            e.to_string().starts_with(&format!("'shown': sslrootcert '{}' cannot be read", missing.display())),
            "{e}"
        );
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let url = format!("postgres://127.0.0.1/db?sslmode=verify-ca&sslrootcert={}", junk.display());
        let (raw, s) = TlsSettings::from_url(&url, "shown").unwrap();
        let e = s.connector(&raw.parse().unwrap(), "shown").err().unwrap();
        assert_eq!(e.to_string(), format!("'shown': sslrootcert '{}' holds no CA certificate", junk.display()));
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The table copied from rustls must stay what rustls's own ring provider offers: the same
    /// suites in the same order, key exchange groups and signature schemes.
    #[test]
    fn ring_provider_is_rustls_own() {
        #[allow(deprecated)] // the very function ring_provider() stands in for
        let theirs = rustls::crypto::ring::default_provider();
        let ours = ring_provider();
        assert_eq!(ours.cipher_suites, theirs.cipher_suites);
        let names = |p: &CryptoProvider| p.kx_groups.iter().map(|g| g.name()).collect::<Vec<_>>();
        assert_eq!(names(&ours), names(&theirs));
        let (o, t) = (&ours.signature_verification_algorithms, &theirs.signature_verification_algorithms);
        assert_eq!(o.supported_schemes(), t.supported_schemes());
        assert_eq!(format!("{:?}", o.all), format!("{:?}", t.all));
        assert_eq!(format!("{:?}", o.mapping), format!("{:?}", t.mapping));
        let mut bytes = [0u8; 32];
        ours.secure_random.fill(&mut bytes).unwrap();
        assert_ne!(bytes, [0u8; 32]);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bw-tls-{}-{}", std::process::id(), uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}

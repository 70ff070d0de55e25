//! Signing keys of the test identity provider: a fixed RSA key (RSA keys
//! are slow to make in debug builds), and fresh ES256/EdDSA keys made by
//! `ring` for rotations and foreign keys.

/// A 2048-bit RSA key (PKCS#1 DER, base64) made for these tests only.
const RSA_KEY: &str = "\
MIIEogIBAAKCAQEAqNty4S2yDKlAWPN8w5XF/yqkFKj+ySuT/VoLc4ret16gtDomZuhQPH/33ix6TUW0m5wsUWBLcjAAXLLowjS+\
kDtOSB9W6N7pbxGEbgpfP/J1ZWVvyjCQkyB09qno9qZn2A3Gh9VviYESLe4NZkrmhaDbf7NiRwBoGZDYUM720ROO2sCoUi11kGBv\
AJoRZ7HfIHDSI6rgQZ02dSNdhXCcunfzPObKOeO1uXQkz6Pl2Se9W/6LUvRnqAyZCgj6onEgSpjQx5v9NQpQgeHHX/Syvgs3hKad\
c9+hGnbuxL7gqUNdeeFvqMMaV3/BT5WiM65sK3d2WqnUfxjYDXfJNAlkoQIDAQABAoIBAAWhT4rHicTB+Jseqeh25s5TvyXQiVzu\
yYqXL9jkkU7UO7qBUoTNi9irPE9Zn02n8dYwa7UzkesW7k7Tnk7Uuw03FQHy8uRlLlZdjf4B9Ya90FaW/mu47nvMB2pZZE2juG8B\
QpSGiXywY4lJgy6HzSOOfKhyND2Be3cYF8ZV/Zp0pRuMtJyP6Z5aqMMHEbA6M21NMJ9t6P5gCalGZxXsIMwGRZZUrcNNMLuuL5Xn\
cfhxcQsDAIWDrBrIlinJ6On/0d16EeIb69/zoRfMe2IUqZtGdkMzwT1ow7enzNoGzH9EOjbmfIa/UzNlKoPFjJ9RiTszKwhYmmX1\
ZDnx798b/7sCgYEA2fYqyz880NN8i6yFcD9Kx1elvEx1Q2BGGcpm4tMx8caLlnb0KEiPVOvO8rkAIr9wJ9lO7FfAvLS6pI6RXwWK\
qa5VQ/ofNC/0ANf33RdBi8N5Jdgjrre2G/DfXb/KAM5qV+755IHv8VYnU1mOX4jzytd2kYenq+pOlNjY6ouBL/cCgYEAxlN0Pbu8\
ZDGt4tuCpoMcrq2FmkTNfesUcoX7SjcXZUmD8ivIGEojMGodAzdraAvTQN9eZAMWRJA+koR6v0v6dDGLa6qUPMNOEi+ivhwZF8uQ\
gKhZuIhDPXRQfhSPM7CqapKS8qEhir58Yv61seZwcldpqRMEVhaP7/yzHqhkGicCgYAb6qWshpr5fDz1ftFQgSrIwXce2QQj7w7L\
etsWrko1V2LFkNLQ3gpNrC5DdGKKEM8Cq5iqOMsc4GEPdpsz+ne6J/QP0tdwTbwI56B9lt70UcMQj9ByLmGKzp0tWsU6uTVxsdAb\
7nCXDpvW1x+fKOFg15v+I8vb/xS1h9iwodGYHQKBgHEHAspkAfwALB+MBqurMV+D2Q6Qg6Rto1uZbBthxl2dRitwNDtTlTZ0Y1B/\
9yB3DNB9/Kd28uvkYSTTh7kaLgSmb9TOhGkUzZujtlYuYUakZxhL2cZHMjsF3RHd2bcVyimumzzYA+u0n+MzUo2uzQr9MmR/SAtg\
FGwrUlH4mgQlAoGAOmKRpqKGUdaluACfioPDzTseeGnP/6t7Ub8L8BeqT6R3fUWU8lnpsU7sHPVh61NNx35abOfayaECW9Oi0tXF\
cbBOyd75qHGqn2IZf6k2G/mOftkCpwflLVlH2ISDqRanflaPYqVo9cS0nf1rQ4eWPbdEeSDcFHayWaoyh1j8Ag4=";

use anyhow::{Context, anyhow};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair,
};
use serde_json::{Value, json};

/// Which algorithm a key signs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The fixed RSA key (one only: every RS256 key is the same key).
    Rs256,
    Es256,
    EdDsa,
}

/// A key that signs tokens, and its public JWK.
#[derive(Clone)]
pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    encoding: EncodingKey,
    pub jwk: Value,
}

impl SigningKey {
    pub fn new(kind: KeyKind, kid: &str) -> anyhow::Result<Self> {
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let rng = SystemRandom::new();
        let (alg, encoding, jwk) = match kind {
            KeyKind::Rs256 => {
                let der = STANDARD.decode(RSA_KEY).context("the fixed RSA key")?;
                let pair = RsaKeyPair::from_der(&der).map_err(|e| anyhow!("RSA key: {e}"))?;
                let public: ring::rsa::PublicKeyComponents<Vec<u8>> = pair.public().into();
                let jwk = json!({"kty": "RSA", "n": b64(&public.n), "e": b64(&public.e),
                    "alg": "RS256"});
                (Algorithm::RS256, EncodingKey::from_rsa_der(&der), jwk)
            }
            KeyKind::Es256 => {
                let alg = &ECDSA_P256_SHA256_FIXED_SIGNING;
                let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng)
                    .map_err(|e| anyhow!("P-256 key: {e}"))?;
                let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng)
                    .map_err(|e| anyhow!("P-256 key: {e}"))?;
                // An uncompressed point: 0x04, x, y.
                let point = pair.public_key().as_ref();
                let jwk = json!({"kty": "EC", "crv": "P-256", "x": b64(&point[1..33]),
                    "y": b64(&point[33..65]), "alg": "ES256"});
                (
                    Algorithm::ES256,
                    EncodingKey::from_ec_der(pkcs8.as_ref()),
                    jwk,
                )
            }
            KeyKind::EdDsa => {
                let pkcs8 =
                    Ed25519KeyPair::generate_pkcs8(&rng).map_err(|e| anyhow!("Ed25519: {e}"))?;
                let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
                    .map_err(|e| anyhow!("Ed25519: {e}"))?;
                let x = b64(pair.public_key().as_ref());
                let jwk = json!({"kty": "OKP", "crv": "Ed25519", "x": x, "alg": "EdDSA"});
                (
                    Algorithm::EdDSA,
                    EncodingKey::from_ed_der(pkcs8.as_ref()),
                    jwk,
                )
            }
        };
        let mut jwk = jwk;
        jwk["kid"] = json!(kid);
        jwk["use"] = json!("sig");
        Ok(SigningKey {
            kid: kid.into(),
            alg,
            encoding,
            jwk,
        })
    }

    /// `claims` signed by this key, its `kid` in the header.
    pub fn sign(&self, claims: &Value) -> anyhow::Result<String> {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).context("signing a JWT")
    }
}

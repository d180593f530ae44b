"""The private key of ``private_key_jwt`` (``DOCLING_MCP_CLIENT_KEY_FILE``) and its algorithm.

The algorithm follows from the key, so an operator configures a file and nothing else: RSA signs
RS256, EC signs ES256/ES384/ES512 by its curve, Ed25519 signs EdDSA. ``cryptography`` reads the
PEM (PKCS#8 or traditional, unencrypted) and tells the kind; joserfc holds it for authlib, which
signs. A key that cannot be read is E313 when the client is built, naming the file, never its
content.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from joserfc import jwk
from pydantic import SecretStr

from errors import AuthorizationFailed

_EC_ALGS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}


@dataclass(frozen=True, slots=True)
class SigningKey:
    """A PEM private key (kept secret) with its JOSE key type and signing algorithm."""

    pem: SecretStr
    key_type: Literal["RSA", "EC", "OKP"]
    alg: str
    source: str = ""

    def __repr__(self) -> str:
        return f"SigningKey({self.alg}, from {self.source or '(memory)'!r})"

    def jwk(self) -> jwk.Key:
        return jwk.import_key(self.pem.get_secret_value(), self.key_type)


def load_signing_key(path: Path | None) -> SigningKey:
    if path is None:
        raise AuthorizationFailed("private_key_jwt needs DOCLING_MCP_CLIENT_KEY_FILE")
    try:
        pem = path.read_bytes()
    except OSError as exc:
        raise AuthorizationFailed(
            f"DOCLING_MCP_CLIENT_KEY_FILE={path}: cannot read it ({exc.strerror})"
        ) from exc
    return signing_key_from_pem(pem, source=str(path))


def signing_key_from_pem(pem: bytes, *, source: str = "") -> SigningKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise AuthorizationFailed(
            f"{source or 'the client key'} is not an unencrypted PEM private key"
        ) from exc
    kind: Literal["RSA", "EC", "OKP"]
    if isinstance(key, rsa.RSAPrivateKey):
        kind, alg = "RSA", "RS256"
    elif isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _EC_ALGS:
        kind, alg = "EC", _EC_ALGS[key.curve.name]
    elif isinstance(key, ed25519.Ed25519PrivateKey):
        kind, alg = "OKP", "EdDSA"
    else:
        raise AuthorizationFailed(
            f"{source or 'the client key'}: a {type(key).__name__} cannot sign a client "
            "assertion; use RSA, EC (P-256/384/521) or Ed25519"
        )
    return SigningKey(SecretStr(pem.decode("ascii")), kind, alg, source)

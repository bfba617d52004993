"""What checking a bearer JWT costs the event loop, per algorithm.

    .venv/bin/python -m benchmarks.jwt_verify

Prints the best-of-5 mean of ``identity.tokens.verify`` (PyJWT parse,
signature, claims) per algorithm, and of ``Authenticator.authenticate`` for
a token it has verified before (the common case: a host sends the same
token with every request). Figures are wall time on this machine; run it on
an idle one.
"""

from __future__ import annotations

import json
import time
import timeit
from typing import Any

import jwt
import trio
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from gateway.config import AuthConfig, JwtConfig
from gateway.identity.authenticator import Authenticator
from gateway.identity.keys import DEFAULT_ALGORITHMS, KeySet
from gateway.identity.tokens import JwtRules, verify

ROUNDS = 2000
SECRET = "s" * 32


def main() -> None:
    """Print the figures."""
    now = time.time()
    keys: dict[str, Any] = {
        "RS256": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ES256": ec.generate_private_key(ec.SECP256R1()),
        "EdDSA": ed25519.Ed25519PrivateKey.generate(),
    }
    jwks = []
    for alg, key in keys.items():
        jwk = json.loads(jwt.get_algorithm_by_name(alg).to_jwk(key.public_key()))
        jwks.append({**jwk, "kid": alg})
    keyset = KeySet.from_jwks({"keys": jwks}, DEFAULT_ALGORITHMS)
    rules = JwtRules(audience="a", issuer="i", secret=SECRET)
    claims = {"iss": "i", "aud": "a", "sub": "x", "exp": now + 600}
    tokens = {alg: jwt.encode(claims, key, alg, headers={"kid": alg}) for alg, key in keys.items()}
    tokens["PS256"] = jwt.encode(claims, keys["RS256"], "PS256", headers={"kid": "RS256"})
    tokens["HS256"] = jwt.encode(claims, SECRET, "HS256")
    for alg, token in tokens.items():
        best = min(
            timeit.repeat(lambda t=token: verify(t, keyset, rules, now), number=ROUNDS, repeat=5)
        )
        print(f"verify {alg}: {best / ROUNDS * 1e6:.0f} us")
    config = AuthConfig(jwt=JwtConfig(secret=SECRET, issuer="i", audience="a"))
    auth = Authenticator(config, "a", file_keys=keyset)
    header = f"Bearer {tokens['RS256']}".encode()

    async def remembered() -> None:
        await auth.authenticate(header, now=now)
        start = time.perf_counter()
        for _ in range(ROUNDS * 10):
            await auth.authenticate(header, now=now)
        per_call = (time.perf_counter() - start) / (ROUNDS * 10)
        print(f"authenticate RS256, verified before: {per_call * 1e6:.1f} us")

    trio.run(remembered)


if __name__ == "__main__":
    main()

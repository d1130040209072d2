#!/usr/bin/env python3
"""Checks an application's attestation with a DSSE implementation that is
not the service's: the `securesystemslib` package (PyPI).

usage: verify-attestation.py ENVELOPE.json ROOT_PUBLIC_KEY_HEX

ENVELOPE.json is the attestation as `fetch` serves it at the application
leaf (the document its `result` fact names); ROOT_PUBLIC_KEY_HEX is the 64
hex digits of the world's root principal (`ed25519:<hex>`). The envelope's
signatures name their key by that principal text, so the key is given the
same key ID. On success it prints the in-toto Statement's type, predicate
type and each subject's SHA-256, and exits 0; a signature that does not
verify exits 1.
"""

import json
import sys

from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

IN_TOTO = "application/vnd.in-toto+json"


def main() -> int:
    envelope_path, root_hex = sys.argv[1], sys.argv[2]
    with open(envelope_path, "rb") as f:
        envelope = Envelope.from_dict(json.load(f))
    if envelope.payload_type != IN_TOTO:
        print(f"unexpected payload type {envelope.payload_type!r}")
        return 1
    key = SSlibKey(
        keyid=f"ed25519:{root_hex}",
        keytype="ed25519",
        scheme="ed25519",
        keyval={"public": root_hex},
    )
    try:
        envelope.verify([key], 1)
    except VerificationError as e:
        print(f"not verified: {e}")
        return 1
    statement = json.loads(envelope.payload)
    print(f"verified {statement['_type']} {statement['predicateType']}")
    for subject in statement["subject"]:
        print(f"  {subject['name']} sha256:{subject['digest']['sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

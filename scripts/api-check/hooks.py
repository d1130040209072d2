"""schemathesis hooks for `make api-check` (loaded by run.sh).

1. `application/x-blobs`. The bytes service's OpenAPI file describes a batch
   stream by its content (an array of blobs, or of `{name, bytes}`); the media
   type says how that content is framed on the wire. The serializer frames
   generated requests and the deserializer unframes responses so that their
   content is checked against the schema.

2. Rules the schema language cannot say. Each service's HTTP.md lists them
   under "What the OpenAPI file cannot say"; a conforming client obeys them.
   Positive cases (schema-valid by construction) are made to obey them before
   they are sent, so that a refusal of one is a real mismatch. Negative cases
   are sent as generated.
"""

import json
import os

import schemathesis
from schemathesis import GenerationMode

SERVICE = os.environ.get("API_CHECK_SERVICE", "")

# Canonical values of contracts/values/vectors.json, chosen by the length of
# the generated text so that runs with one seed stay reproducible.
# Facts: tuples whose predicate is an atom.
FACTS = ["gmFw9Q==", "gwECAw=="]
# Atoms (any canonical value matches an argument; a predicate is an atom).
ATOMS = ["AA==", "YWE=", "QwECAw==", "9g=="]

# A key that is a canonical point of large order (a principal of
# auth-vectors.json): a worker's principal must be admissible.
ADMISSIBLE_PRINCIPAL = "ed25519:ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1"

# A path label is at most 255 bytes of UTF-8; the schema counts characters.
MAX_LABEL_BYTES = 255


# -- application/x-blobs -----------------------------------------------------


def _as_bytes(item):
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    data = getattr(item, "data", None)  # schemathesis' Binary
    return data if isinstance(data, bytes) else None


@schemathesis.serializer("application/x-blobs")
def frame_blobs(ctx, value):
    """Each blob as a record `<size>\\n<bytes>`. A value that is not an array
    of blobs (a negative case) is sent as its JSON text, which is never a
    well-formed stream."""
    items = [_as_bytes(item) for item in value] if isinstance(value, list) else None
    if items is None or any(item is None for item in items):
        return json.dumps(value, default=str).encode()
    return b"".join(b"%d\n%s" % (len(item), item) for item in items)


@schemathesis.deserializer("application/x-blobs")
def unframe_blobs(ctx, response):
    """Records `<name> <size>\\n<bytes>` as `[{name, bytes}]`, bytes as Latin-1
    text (one character per byte)."""
    body = response.content
    records = []
    while body:
        line, newline, rest = body.partition(b"\n")
        name, space, size = line.partition(b" ")
        if not newline or not space or not size.isdigit():
            raise ValueError(f"malformed record header {line[:80]!r}")
        size = int(size)
        if len(rest) < size:
            raise ValueError(f"record of {size} bytes cut short at {len(rest)}")
        records.append({"name": name.decode("ascii"), "bytes": rest[:size].decode("latin-1")})
        body = rest[size:]
    return records


# -- positive cases obey what the schema cannot say ---------------------------


def canonical_integers(value):
    """JSON numbers with an integral value are written as integers (`60`,
    never `60.0` or `6e1`)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [canonical_integers(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical_integers(v) for k, v in value.items()}
    return value


def _pick(choices, text):
    return choices[len(text) % len(choices)]


def _integer(value):
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def ordered_bounds(value):
    """Wherever both are given, `after` is at most `through`."""
    if isinstance(value, list):
        return [ordered_bounds(v) for v in value]
    if not isinstance(value, dict):
        return value
    value = {k: ordered_bounds(v) for k, v in value.items()}
    after, through = _integer(value.get("after")), _integer(value.get("through"))
    if after is not None and through is not None and after > through:
        value["after"] = value["through"]
    return value


def known_cutoff(value):
    """A request's `through` is a cutoff of the selected journal: 0, or one
    an earlier answer reported. A client that has none sends 0."""
    if "through" in value:
        value["through"] = 0 if isinstance(value["through"], int) else "0"
    return value


def without_issued_state(value):
    """`cursor` (and the journal's `snapshot`, which a query continuation
    echoes) are only ever sent back as the service issued them; a client
    never makes one up."""
    for member in ("cursor", "snapshot"):
        value.pop(member, None)
    return value


def journal_values(body):
    """Facts, predicates and `equals` are base64 of canonical values: a fact
    for `facts`, an atom for `filter.predicate`."""
    if isinstance(body.get("facts"), list):
        body["facts"] = [_pick(FACTS, f) if isinstance(f, str) else f for f in body["facts"]]
    filter_ = body.get("filter")
    if isinstance(filter_, dict):
        if isinstance(filter_.get("predicate"), str):
            filter_["predicate"] = _pick(ATOMS, filter_["predicate"])
        for argument in filter_.get("arguments") or []:
            if isinstance(argument, dict) and isinstance(argument.get("equals"), str):
                argument["equals"] = _pick(ATOMS, argument["equals"])
    return body


def _short_label(label):
    if not isinstance(label, str):
        return label
    data = label.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_LABEL_BYTES:
        return label
    return data[:MAX_LABEL_BYTES].decode("utf-8", "ignore")


def coordination_body(body):
    """Admissible principals; path labels within 255 bytes."""
    if isinstance(body.get("principal"), str):
        body["principal"] = ADMISSIBLE_PRINCIPAL
    if isinstance(body.get("path"), list):
        body["path"] = [_short_label(label) for label in body["path"]]
    return body


def coordination_query(query):
    """Path labels within 255 bytes."""
    if isinstance(query.get("path"), list):
        query["path"] = [_short_label(label) for label in query["path"]]
    return query


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    if isinstance(case.body, (dict, list)):
        case.body = canonical_integers(case.body)
    if isinstance(case.body, dict):
        case.body = ordered_bounds(known_cutoff(without_issued_state(case.body)))
        if SERVICE == "journal":
            case.body = journal_values(case.body)
        elif SERVICE == "coordination":
            case.body = coordination_body(case.body)
    if isinstance(case.query, dict):
        case.query = ordered_bounds(known_cutoff(without_issued_state(case.query)))
        if SERVICE == "coordination":
            case.query = coordination_query(case.query)
    return case

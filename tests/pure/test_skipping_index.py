"""The skipping indexes' pure core, type by type: what each answers, NULLs, canonical values,
patterns, the blob, and the declarations' sentences (sparkext.planning.skipping)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import time
import uuid
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from sparkext.errors import UsageError
from sparkext.planning.skipping import (
    BLOB_TYPE,
    INDEX_TYPES,
    IndexSpec,
    blob_entries,
    blob_spec,
    build_entry,
    decode_blob,
    encode_blob,
    options_doc,
    prune,
    text,
    validate_spec,
)
from sparkext.planning.skipping.answers import dyadic_blocks
from sparkext.planning.skipping.entries import parse_entry, range_blocks
from sparkext.planning.skipping.hashing import bloom_positions, hash_bytes, hash_words
from sparkext.planning.skipping.predicate import FALSE, TRUE, All, Leaf, parse
from sparkext.planning.skipping.text import java_regex, like_segments, tokens
from sparkext.planning.skipping.values import order_keys

pytestmark = pytest.mark.pure


def index(kind, column_type, files, options=None, column="c"):
    """A decoded index over files {path: values (a list, an Arrow array, or None)}."""
    spec = validate_spec("ix", kind, [column], options or {}, {column: column_type})
    entries = []
    for path, values in files.items():
        if isinstance(values, list):
            values = pa.array(values, _arrow(column_type))
        entries.append((path, build_entry(spec, column_type, values)))
    return decode_blob(encode_blob(spec, column_type, entries))


def _arrow(column_type):
    return {
        "int": pa.int32(),
        "bigint": pa.int64(),
        "tinyint": pa.int8(),
        "string": pa.string(),
        "double": pa.float64(),
        "float": pa.float32(),
        "date": pa.date32(),
        "boolean": pa.bool_(),
        "binary": pa.binary(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
    }.get(column_type)


def kept(loaded, predicate, candidates=None):
    loaded = loaded if isinstance(loaded, list) else [loaded]
    candidates = candidates or sorted({p for ix in loaded for p in ix.paths})
    pruned = prune(loaded, predicate, candidates)
    return [c for c, keep in zip(candidates, pruned.keep, strict=True) if keep]


def leaf(op, type_name="string", col="c", **rest):
    return {"op": op, "col": col, "type": type_name, **rest}


def eq(value, type_name="string", **rest):
    return leaf("eq", type_name, value=value, **rest)


def like(pattern, **rest):
    return leaf("like", pattern=pattern, **rest)


# -- declarations ---------------------------------------------------------------------------------

COLUMNS = {"id": "bigint", "msg": "string", "tags": "array<string>", "price": "decimal(30,2)"}


@pytest.mark.parametrize(
    ("args", "sentence"),
    [
        (
            ("ix", "bloomfilter", ["id"], {}),
            "Index type 'bloomfilter' is unknown: use one of bloom_filter, bitmap, "
            "bloom_range_filter, token_bloom_filter, token_bitmap, ngram_bloom_filter, "
            "ngram_bitmap.",
        ),
        (
            ("ix", "bitmap", ["nope"], {}),
            "Column 'nope' is not a top-level column of the table: use one of id, msg, tags, "
            "price.",
        ),
        (
            ("ix", "bitmap", ["id", "msg"], {}),
            "An index covers one column, not 2 (id, msg): create one index per column.",
        ),
        (
            ("ix", "token_bitmap", ["id"], {}),
            "A token_bitmap index cannot cover column 'id' of type bigint: it takes string "
            "columns.",
        ),
        (
            ("ix", "bloom_range_filter", ["price"], {}),
            "A bloom_range_filter index cannot cover column 'price' of type decimal(30,2): it "
            "takes tinyint, smallint, int, bigint, float, double, decimal with a precision up to "
            "18, date, timestamp and timestamp_ntz columns.",
        ),
        (
            ("ix", "bitmap", ["tags"], {}),
            "A bitmap index cannot cover column 'tags' of type array<string>: it takes tinyint, "
            "smallint, int, bigint, float, double, decimal, string, binary, boolean, date, "
            "timestamp and timestamp_ntz columns.",
        ),
        (
            ("ix", "bloom_filter", ["id"], {"fp": "0.1"}),
            "Option 'fp' is unknown for a bloom_filter index: use fpp or max_bytes.",
        ),
        (
            ("ix", "bloom_filter", ["id"], {"fpp": "0.5"}),
            "Option fpp = '0.5' is out of range for a bloom_filter index: use a number above 0 "
            "and below 0.5, such as 0.01.",
        ),
        (
            ("ix", "ngram_bitmap", ["msg"], {"n": "9"}),
            "Option n = '9' is out of range for a ngram_bitmap index: use a whole number from 2 "
            "to 8.",
        ),
        (
            ("ix", "bitmap", ["id"], {"max_distinct": "0"}),
            "Option max_distinct = '0' is out of range for a bitmap index: use a whole number "
            "from 1 to 65536.",
        ),
        (
            ("ix", "bloom_filter", ["id"], {"max_bytes": "16"}),
            "Option max_bytes = '16' is out of range for a bloom_filter index: use a byte size "
            "from 32 to 1073741824 (1GB), such as 1048576 or 1MB.",
        ),
        (
            ("ix", "token_bitmap", ["msg"], {"case_sensitive": "yes"}),
            "Option case_sensitive = 'yes' is out of range for a token_bitmap index: use true or "
            "false.",
        ),
        (
            ("9ix", "bitmap", ["id"], {}),
            "Index name '9ix' is not a plain identifier: use letters, digits and underscores, "
            "not starting with a digit.",
        ),
        (
            ("ix", "bitmap", [], {}),
            "An index covers one column, not 0 (none): create one index per column.",
        ),
    ],
)
def test_bad_declarations_are_one_sentence_naming_the_choices(args, sentence):
    with pytest.raises(UsageError) as error:
        validate_spec(*args, COLUMNS)
    assert str(error.value) == sentence


def test_a_declaration_is_normalised_and_survives_its_table_property():
    spec = validate_spec(
        "Req_IX", "NGRAM_BLOOM_FILTER", ["MSG"], {"FPP": "0.050", "max_bytes": "64k"}, COLUMNS
    )
    assert spec == IndexSpec(
        "req_ix",
        "ngram_bloom_filter",
        "msg",
        {"n": "3", "case_sensitive": "false", "fpp": "0.05", "max_bytes": "65536"},
    )
    text = spec.to_property()
    assert json.loads(text) == {
        "type": "ngram_bloom_filter",
        "column": "msg",
        "options": {"case_sensitive": "false", "fpp": "0.05", "max_bytes": "65536", "n": "3"},
    }
    assert IndexSpec.from_property("req_ix", text) == spec
    assert spec.label == "ngram_bloom_filter, msg"


def test_a_table_property_that_is_no_declaration_is_one_sentence():
    with pytest.raises(UsageError) as error:
        IndexSpec.from_property("ix", "{not json")
    assert str(error.value) == (
        "The table property sparkext.index.ix holds '{not json', which is no index declaration: "
        'it takes JSON such as {"type": "bloom_filter", "column": "c", "options": {}}; drop the '
        "index and create it again."
    )


def test_options_doc_covers_every_type_in_order():
    doc = options_doc()
    assert tuple(doc) == INDEX_TYPES
    assert [o for o, _, _ in doc["bloom_range_filter"]] == ["step", "fpp", "max_bytes"]
    assert all(meaning for options in doc.values() for _, _, meaning in options)


# -- the hash is part of the stored format --------------------------------------------------------


def test_the_hash_never_changes():
    # Blobs written today are probed by later versions: these values are the format.
    assert hash_bytes([b"", b"a", b"hello world"]).tolist() == [
        0,
        12442179265566355407,
        2938689238774262072,
    ]
    assert hash_words(np.array([0, 1], np.uint64)).tolist() == [
        7518753758973681178,
        8995410912185531384,
    ]
    assert (
        hash_words(np.array([5], np.int64).view(np.uint64)).tolist()
        == hash_bytes([(5).to_bytes(8, "little")]).tolist()
    )


# -- bloom_filter ---------------------------------------------------------------------------------


def test_bloom_filter_answers_equality_in_and_nulls():
    ix = index(
        "bloom_filter",
        "bigint",
        {"a": [1, 2, None], "b": [3, 4], "c": None, "d": [None, None], "e": []},
    )
    assert kept(ix, eq(3, "bigint")) == ["b"]
    assert kept(ix, leaf("in", "bigint", values=[1, 4, None])) == ["a", "b"]
    assert kept(ix, leaf("eq_null_safe", "bigint", value=None)) == ["a", "c", "d"]
    assert kept(ix, leaf("eq_null_safe", "bigint", value=2)) == ["a"]
    assert kept(ix, {"op": "is_null", "col": "c"}) == ["a", "c", "d"]
    assert kept(ix, {"op": "is_not_null", "col": "c"}) == ["a", "b"]
    # a range is no question for a bloom filter, but a file of NULLs has no value at all
    assert kept(ix, leaf("gt", "bigint", value=0)) == ["a", "b"]
    assert kept(ix, eq(None, "bigint")) == []  # c = NULL is never true
    pruned = prune([ix], leaf("gt", "bigint", value=0), ["a", "b", "z"])
    assert pruned.keep.tolist() == [True, True, True] and pruned.used == ()


def test_an_int_column_probed_as_bigint_and_out_of_range_values():
    ix = index("bloom_filter", "int", {"a": [7, -(2**31)], "b": [2**31 - 1]})
    assert kept(ix, eq(7, "bigint")) == ["a"]
    assert kept(ix, eq(2**31 - 1, "bigint")) == ["b"]
    assert kept(ix, eq(3_000_000_000, "bigint")) == []  # no int is 3000000000
    assert kept(ix, eq("7", "string")) == ["a", "b"]  # unrelated types: cannot say


def test_dictionary_and_chunked_arrays_are_read_as_their_values():
    dictionary = pa.array(["xxx", "yyy", "xxx", None]).dictionary_encode()
    chunked = pa.chunked_array([pa.array(["ppp"]), pa.array(["qqq", None])])
    for kind in ("bloom_filter", "bitmap", "token_bitmap", "ngram_bloom_filter"):
        ix = index(kind, "string", {"a": dictionary, "b": chunked})
        assert kept(ix, eq("yyy")) == ["a"], kind
        assert kept(ix, eq("qqq")) == ["b"], kind


def test_an_iceberg_uuid_column_is_indexed_as_the_text_spark_shows():
    one, two = uuid.UUID(int=1), uuid.UUID(int=2**127)
    for values in (pa.array([one.bytes, None], pa.binary(16)), pa.array([one.bytes], pa.uuid())):
        for kind in ("bloom_filter", "bitmap", "ngram_bitmap"):
            ix = index(kind, "string", {"a": values, "b": [str(two)]})
            assert kept(ix, eq(str(one))) == ["a"], kind
            assert kept(ix, eq(str(two))) == ["b"], kind
    fixed = index("bitmap", "binary", {"a": pa.array([b"\x01\x02"], pa.binary(2))})
    assert kept(fixed, eq("AQI=", "binary")) == ["a"]


def test_floats_make_minus_zero_zero_and_nan_one_value():
    files = {"a": [-0.0, 1.5], "b": [float("nan")], "c": [2.5, None]}
    for kind in ("bloom_filter", "bitmap", "bloom_range_filter"):
        ix = index(kind, "double", files)
        assert kept(ix, eq(0.0, "double")) == ["a"], kind
        assert kept(ix, eq(-0.0, "double")) == ["a"], kind
        assert kept(ix, eq("NaN", "double")) == ["b"], kind
        assert kept(ix, eq("Infinity", "double")) == [], kind
    ranged = index("bloom_range_filter", "double", files)
    assert kept(ranged, leaf("gt", "double", value="Infinity")) == ["b"]  # NaN sorts above
    assert kept(ranged, leaf("lt", "double", value=0.0)) == []
    assert kept(ranged, leaf("le", "double", value=-0.0)) == ["a"]


def test_a_float_column_probed_as_float_and_as_double():
    ix = index("bitmap", "float", {"a": [0.1], "b": [0.5]})
    assert kept(ix, eq(0.1, "float")) == ["a"]  # the float nearest 0.1
    assert kept(ix, eq(0.1, "double")) == []  # cast(c as double) = 0.1 holds for no float
    assert kept(ix, eq(0.5, "double")) == ["b"]


def test_decimals_compare_as_numbers_at_the_column_scale():
    files = {
        "a": pa.array([Decimal("1.50"), None], pa.decimal128(10, 2)),
        "b": pa.array([Decimal("-2.25")], pa.decimal128(10, 2)),
    }
    for kind in ("bloom_filter", "bitmap", "bloom_range_filter"):
        ix = index(kind, "decimal(10,2)", files)
        assert kept(ix, eq("1.5", "decimal(10,1)")) == ["a"], kind
        assert kept(ix, eq("1.505", "decimal(12,3)")) == [], kind  # not a decimal(10,2)
        assert kept(ix, leaf("in", "decimal(12,2)", values=["-2.25", "9.99"])) == ["b"], kind
    ranged = index("bloom_range_filter", "decimal(10,2)", files)
    assert kept(ranged, leaf("lt", "decimal(12,3)", value="-2.249")) == ["b"]
    assert kept(ranged, leaf("lt", "decimal(12,3)", value="-2.250")) == []
    wide = {"a": pa.array([Decimal("12345678901234567890.123")], pa.decimal128(30, 3))}
    for kind in ("bloom_filter", "bitmap"):
        ix = index(
            kind, "decimal(30,3)", {**wide, "b": pa.array([Decimal(-1)], pa.decimal128(30, 3))}
        )
        assert kept(ix, eq("12345678901234567890.123", "decimal(30,3)")) == ["a"], kind
        assert kept(ix, eq("-1", "decimal(30,3)")) == ["b"], kind
    wide_bitmap = index(
        "bitmap", "decimal(30,3)", {**wide, "b": pa.array([Decimal(-1)], pa.decimal128(30, 3))}
    )
    assert kept(wide_bitmap, leaf("lt", "decimal(30,3)", value="0")) == ["b"]
    assert kept(wide_bitmap, leaf("ge", "decimal(30,3)", value="0")) == ["a"]


def test_timestamps_with_and_without_zone_and_dates_are_numbers():
    moment = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
    micros = int(moment.timestamp() * 1_000_000)
    zoned = pa.array([moment], pa.timestamp("us", tz="Europe/Paris"))  # the same instant
    local = pa.array([moment.replace(tzinfo=None)], pa.timestamp("us"))
    nanos = pa.array([moment], pa.timestamp("ns", tz="UTC"))
    for kind in ("bloom_filter", "bitmap", "bloom_range_filter"):
        ix = index(kind, "timestamp", {"a": zoned, "b": nanos, "c": [moment.replace(year=2020)]})
        assert kept(ix, eq(micros, "timestamp")) == ["a", "b"], kind
        ntz = index(kind, "timestamp_ntz", {"a": local})
        assert kept(ntz, eq(micros, "timestamp_ntz")) == ["a"], kind
        assert kept(ntz, eq(micros, "timestamp")) == ["a"], kind  # not comparable: kept
        days = index(kind, "date", {"a": [dt.date(1970, 1, 2)], "b": [dt.date(1969, 12, 31)]})
        assert kept(days, eq(-1, "date")) == ["b"], kind


def test_bloom_filters_are_sized_by_distinct_count_and_capped_at_max_bytes():
    spec = validate_spec("ix", "bloom_filter", ["c"], {"max_bytes": "1k"}, {"c": "bigint"})
    small = parse_entry(build_entry(spec, "bigint", pa.array([1, 1, 1, 2])), "bloom_filter", "")
    assert (small.distinct, len(small.bits), small.capped, small.k) == (2, 32, False, 7)
    many = pa.array(range(5000), pa.int64())
    big = parse_entry(build_entry(spec, "bigint", many), "bloom_filter", "")
    # capped: 1.6 bits per value, so k is the optimal round(m / n * ln 2) = 1 for them (fpp 0.46;
    # the fpp's k = 7 would make it 0.91)
    assert (big.distinct, len(big.bits), big.capped, big.k) == (5000, 1024, True, 1)
    roomy = validate_spec("ix", "bloom_filter", ["c"], {}, {"c": "bigint"})
    sized = parse_entry(build_entry(roomy, "bigint", many), "bloom_filter", "")
    # entry format 2: -5000 ln(0.01) / (ln 2)^2 = 47,926 bits = 749 words, up to the size class
    # ceil(2^(77/8)) = 790 words (format 1 rounded up to a power of two: 8192 bytes)
    assert (len(sized.bits), sized.capped, sized.k) == (6320, False, 7)
    ix = index("bloom_filter", "bigint", {"a": many}, {"max_bytes": "1k"})
    assert kept(ix, eq(4999, "bigint")) == ["a"]  # capped: more false positives, no misses
    odd = validate_spec("ix", "bloom_filter", ["c"], {"max_bytes": "1001"}, {"c": "bigint"})
    assert len(parse_entry(build_entry(odd, "bigint", many), "bloom_filter", "").bits) == 1000


def test_bloom_table_probes_every_size_class_and_k_like_one_filter_at_a_time():
    """Files of many sizes (size classes) and k (capped files take fewer probes) in one index:
    the vectorised probe equals testing each file's bits one by one, and no value is missed."""
    rng = np.random.default_rng(5)
    counts = [1, 3, 50, 51, 70, 400, 1000, 2000, 5000, 9000, 20000]
    files = {f"f{i}": pa.array(rng.integers(0, 1 << 40, n)) for i, n in enumerate(counts)}
    ix = index(
        "bloom_filter",
        "bigint",
        files | {"empty": pa.array([None], pa.int64())},
        {"max_bytes": "4k"},
    )
    assert len({(k, nbytes) for k, nbytes, _ in ix.blooms.classes}) >= 8
    assert len({k for k, _, _ in ix.blooms.classes}) >= 3  # 7, and capped files' 2 and 1
    probes = np.concatenate([files["f3"].to_numpy(), rng.integers(0, 1 << 40, 3000)])
    hashes = hash_words(probes.view(np.uint64))
    rows = np.array([ix.row_of[p] for p in ix.paths])
    got = ix.blooms.probe(hashes, rows)
    spec = validate_spec("ix", "bloom_filter", ["c"], {"max_bytes": "4k"}, {"c": "bigint"})
    for at, path in enumerate(ix.paths):
        entry = parse_entry(build_entry(spec, "bigint", files.get(path)), "bloom_filter", "")
        if not entry.bits:
            assert not got[at].any()
            continue
        bits = np.unpackbits(np.frombuffer(entry.bits, np.uint8), bitorder="little")
        positions = bloom_positions(hashes, entry.k, len(entry.bits))
        assert (got[at] == bits[positions].all(axis=1)).all(), path
        own = hash_words(files[path].to_numpy().view(np.uint64))
        assert ix.blooms.probe_all(own, rows[at : at + 1]).all(), path
    chunked = ix.blooms.probe(np.tile(hashes, 30), rows)  # over a million cells: in chunks
    assert (chunked == np.tile(got, 30)).all()


def _bloom_bits(kind, fpp, distinct):
    """(bits of one entry, the items it holds) for ``distinct`` items of a bloom type."""
    column_type = "bigint" if kind in ("bloom_filter", "bloom_range_filter") else "string"
    spec = validate_spec("ix", kind, ["c"], {"fpp": str(fpp)}, {"c": column_type})
    if kind == "bloom_filter":
        values, items = pa.array(np.arange(distinct) * 7919), distinct
    elif kind == "bloom_range_filter":
        keys = np.arange(distinct, dtype=np.uint64) * np.uint64(1_000_003)
        values = pa.array(keys.astype(np.int64))
        items = len(range_blocks(order_keys("int", keys.astype(np.int64)), 4)[0])
    elif kind == "token_bloom_filter":
        values, items = pa.array([f"w{i}" for i in range(distinct)]), distinct
    else:  # 3-grams of distinct 3-letter words
        letters = "abcdefghijklmnopqrstuvwxyz0123456789"
        grams = [
            "".join(t) for t in itertools.islice(itertools.product(letters, repeat=3), distinct)
        ]
        values, items = pa.array(grams), distinct
    entry = parse_entry(build_entry(spec, column_type, values), kind, column_type)
    return len(entry.bits) * 8, items


@pytest.mark.parametrize(
    "kind", ["bloom_filter", "bloom_range_filter", "token_bloom_filter", "ngram_bloom_filter"]
)
def test_bloom_entries_are_within_15_percent_of_the_optimal_size(kind):
    """Bitsets come in size classes 2^(1/8) apart (64-bit words), not powers of two: at most
    ~9% above the optimal -n ln(fpp) / (ln 2)^2 bits."""
    for distinct, fpp in [
        (300, 0.01),
        (1000, 0.05),
        (5000, 0.01),
        (5000, 0.001),
        (20000, 0.0001),
        (40000, 0.02),
    ]:
        if kind == "bloom_range_filter" and distinct > 5000:
            continue  # 16 blocks per value: 80,000 items already
        bits, items = _bloom_bits(kind, fpp, distinct)
        optimal = -items * math.log(fpp) / math.log(2) ** 2
        assert optimal <= bits <= 1.15 * optimal, (kind, distinct, fpp, bits / optimal)


@pytest.mark.parametrize("fpp", [0.05, 0.01, 0.001, 0.0001])
def test_one_probe_false_positive_rate_stays_within_twice_fpp_at_5000_values(fpp):
    rng = np.random.default_rng(11)
    values = rng.choice(np.int64(1) << 40, 5000, replace=False)
    ix = index("bloom_filter", "bigint", {"a": pa.array(values)}, {"fpp": str(fpp)})
    absent = rng.integers(np.int64(1) << 41, np.int64(1) << 42, 400_000)
    present = ix.blooms.probe(hash_words(absent.view(np.uint64)), np.zeros(1, np.int64))[0]
    assert ix.blooms.probe_all(hash_words(values.view(np.uint64)), np.zeros(1, np.int64)).all()
    assert present.mean() <= 2 * fpp, (fpp, present.mean())


# -- bitmap ---------------------------------------------------------------------------------------


def test_bitmap_answers_every_comparison_exactly():
    ix = index("bitmap", "int", {"a": [1, 2, None], "b": [5], "c": [5, 6], "d": [None]})
    assert kept(ix, leaf("ne", "int", value=5)) == ["a", "c"]
    assert kept(ix, leaf("not", arg=eq(5, "int"))) == ["a", "c"]
    assert kept(ix, {"op": "not", "arg": leaf("in", "int", values=[5, 6])}) == ["a"]
    assert kept(ix, {"op": "not", "arg": leaf("in", "int", values=[5, None])}) == []
    assert kept(ix, leaf("ge", "int", value=6)) == ["c"]
    assert kept(ix, {"op": "not", "arg": leaf("lt", "int", value=6)}) == ["c"]
    both = {"op": "and", "args": [leaf("gt", "int", value=1), leaf("lt", "int", value=5)]}
    assert kept(ix, both) == ["a"]  # 2 lies in (1, 5)
    assert kept(ix, {"op": "not", "arg": leaf("eq_null_safe", "int", value=5)}) == ["a", "c", "d"]
    assert kept(ix, leaf("lt", "bigint", value=-3_000_000_000)) == []
    assert kept(ix, leaf("gt", "bigint", value=-3_000_000_000)) == ["a", "b", "c"]


def test_bitmap_tests_string_predicates_on_its_values():
    files = {"a": ["GET /api", "POST /login"], "b": ["get /API"], "c": ["100% done_ok"]}
    ix = index("bitmap", "string", files)
    assert kept(ix, leaf("starts_with", value="GET")) == ["a"]
    assert kept(ix, leaf("ends_with", value="API")) == ["b"]
    assert kept(ix, leaf("contains", value="/log")) == ["a"]
    assert kept(ix, like("%/api")) == ["a"]
    assert kept(ix, like("%/api", fold="lower")) == ["a", "b"]
    assert kept(ix, like("100\\% done\\_%")) == ["c"]
    assert kept(ix, like("100!% done!_%", escape="!")) == ["c"]
    assert kept(ix, like("100% done_ok")) == ["c"]
    assert kept(ix, like("_00\\%%")) == ["c"]
    assert kept(ix, like("bad\\x")) == ["a", "b", "c"]  # Spark refuses it: no answer
    slashes = index("bitmap", "string", {"a": ["Error a\\b"], "b": ["a%b"]})
    assert kept(slashes, like("% a\\\\b%", fold="lower")) == ["a"]  # an escaped backslash
    assert kept(slashes, leaf("contains", value="a\\b")) == ["a"]
    assert kept(ix, eq("GET /API", fold="upper")) == ["a", "b"]
    assert kept(ix, leaf("lt", value="G")) == ["c"]
    assert kept(ix, leaf("rlike", pattern="^(GET|POST)")) == ["a", "b", "c"]  # not read: kept
    assert kept(ix, leaf("rlike", pattern="^GET .*i$")) == ["a"]
    assert kept(ix, leaf("rlike", pattern="\\Q100%\\E")) == ["c"]


def test_a_java_dollar_also_matches_before_a_final_line_terminator():
    ix = index("bitmap", "string", {"a": ["tail\r\n"], "b": ["tail\nmore"], "c": ["tail\u2028"]})
    assert kept(ix, leaf("rlike", pattern="tail$")) == ["a", "c"]
    assert kept(ix, leaf("rlike", pattern="l.m")) == []  # . matches no line terminator


def test_bitmap_with_too_many_values_answers_only_nulls():
    ix = index("bitmap", "int", {"a": [1, 2, 3], "b": [1], "c": [None]}, {"max_distinct": "2"})
    assert kept(ix, eq(3, "int")) == ["a"]  # a is over the limit: always read
    assert kept(ix, eq(1, "int")) == ["a", "b"]
    assert kept(ix, eq(9, "int")) == ["a"]
    assert kept(ix, {"op": "is_null", "col": "c"}) == ["c"]


def test_booleans_and_binary():
    flags = index("bitmap", "boolean", {"a": [True], "b": [False, None]})
    assert kept(flags, eq(True, "boolean")) == ["a"]
    assert kept(flags, leaf("lt", "boolean", value=True)) == ["b"]
    blobs = index("bloom_filter", "binary", {"a": [b"\x00\x01"], "b": [b"\xff"]})
    assert kept(blobs, eq("AAE=", "binary")) == ["a"]  # base64 of 00 01


# -- bloom_range_filter ---------------------------------------------------------------------------


def test_dyadic_blocks_cover_the_range_exactly():
    for low, high, step in [(3, 40, 4), (0, 2**64 - 1, 4), (5, 5, 1), (2**63, 2**63 + 77777, 3)]:
        blocks = dyadic_blocks(low, high, step)
        covered = []
        for level, prefix in blocks:
            covered.append((prefix << (level * step), ((prefix + 1) << (level * step)) - 1))
        covered.sort()
        assert covered[0][0] == low and covered[-1][1] == high
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(covered))
    assert dyadic_blocks(1, 2**64 - 2, 8) is None  # too many probes: answered by min/max only


def test_bloom_range_filter_finds_holes_inside_min_and_max():
    files = {"a": [0, 1000], "b": [500], "c": [None], "d": list(range(0, 1000, 10))}
    ix = index("bloom_range_filter", "bigint", files)
    assert kept(ix, leaf("gt", "bigint", value=1000)) == []
    assert kept(ix, leaf("ge", "bigint", value=1000)) == ["a"]
    inside = {
        "op": "and",
        "args": [leaf("ge", "bigint", value=400), leaf("le", "bigint", value=600)],
    }
    assert kept(ix, inside) == ["b", "d"]  # a's min and max straddle it, its bloom says no
    narrow = {
        "op": "and",
        "args": [leaf("gt", "bigint", value=991), leaf("lt", "bigint", value=999)],
    }
    assert kept(ix, narrow) == []
    assert kept(ix, eq(500, "bigint")) == ["b", "d"]
    assert kept(ix, leaf("in", "bigint", values=[5, 1000])) == ["a"]
    assert kept(ix, leaf("ne", "bigint", value=500)) == ["a", "d"]
    ints = index("bloom_range_filter", "tinyint", {"a": pa.array([-128, 127], pa.int8())})
    assert kept(ints, leaf("lt", "bigint", value=-127)) == ["a"]
    assert kept(ints, leaf("lt", "bigint", value=-128)) == []


# -- token indexes --------------------------------------------------------------------------------

LOG = {
    "a": ["ERROR: connection timeout after 30s", "user=alice"],
    "b": ["INFO request done", "timeouts=0"],
    "c": ["WARN İstanbul ΣΟΦΙΑ straße", None],
    "d": None,
}


def test_token_indexes_need_the_whole_tokens_of_the_literal():
    for kind in ("token_bloom_filter", "token_bitmap"):
        ix = index(kind, "string", LOG)
        assert kept(ix, like("% timeout %")) == ["a"], kind
        assert kept(ix, like("ERROR:%")) == ["a"], kind
        assert kept(ix, like("%=alice")) == ["a"], kind
        assert kept(ix, leaf("contains", value=" request ")) == ["b"], kind
        assert kept(ix, eq("user=alice")) == ["a"], kind
        assert kept(ix, leaf("in", values=["user=bob", "timeouts=0"])) == ["b"], kind
        assert kept(ix, leaf("rlike", pattern="^ERROR\\: .*after")) == ["a"], kind
        assert kept(ix, like("%timeout%")) == (
            ["a", "b"] if kind == "token_bitmap" else ["a", "b", "c"]
        )
    bitmap = index("token_bitmap", "string", LOG)
    assert kept(bitmap, like("%meout%")) == ["a", "b"]  # a part of some token
    assert kept(bitmap, like("% time%")) == ["a", "b"]  # a token's prefix
    assert kept(bitmap, like("%outs=%")) == ["b"]  # a token's suffix
    assert kept(bitmap, like("%xyz%")) == []


def test_a_folded_token_index_answers_both_cases_and_lower():
    for kind in ("token_bloom_filter", "token_bitmap"):
        ix = index(kind, "string", LOG)
        # no row has 'error:' in lower case; the folded index holds 'error' (from 'ERROR')
        assert kept(ix, like("error:%")) == ["a"], kind
        assert kept(ix, like("%ERROR%")) == (["a"] if kind == "token_bitmap" else ["a", "b", "c"])
        assert kept(ix, like("error:%", fold="lower")) == ["a"], kind
        # lower('İstanbul') is 'i̇stanbul' (i, a combining dot, stanbul): no 'istanbul' in it
        assert kept(ix, like("%istanbul%", fold="lower")) == (
            [] if kind == "token_bitmap" else ["a", "b", "c"]
        ), kind
        assert kept(ix, like("% i̇stanbul %", fold="lower")) == ["c"], kind
        assert kept(ix, like("% İstanbul %")) == ["c"], kind
        assert kept(ix, like("% σοφια %", fold="lower")) == ["c"], kind
        assert kept(ix, like("% ΣΟΦΙΑ %")) == ["c"], kind
        assert kept(ix, like("% STRASSE", fold="upper")) == ["a", "b", "c"], kind  # upper: kept
        sensitive = index(kind, "string", LOG, {"case_sensitive": "true"})
        assert kept(sensitive, like("% timeout %")) == ["a"], kind
        assert kept(sensitive, like("% TIMEOUT %")) == [], kind
        assert kept(sensitive, like("% timeout %", fold="lower")) == ["a", "b", "c"], kind


def test_token_pattern_reading():
    assert tokens("a-b_c d9 ÄÖ") == ["a", "b", "c", "d9", "ÄÖ"]
    assert like_segments("a\\%b%_c") == like_segments("a!%b%_c", "!")
    assert like_segments("bad\\") is None
    assert java_regex("a[bc]") is None
    assert java_regex("(?i)a") is None
    assert java_regex("a\\d") is None
    assert [s.text for s in java_regex("ab+c?d*e").segments] == ["ab", "e"]
    assert java_regex("^x.*y$").python == (
        "\\Ax[^\\n\\r\\u0085\\u2028\\u2029]*y(?=(?:\\r\\n|[\\n\\r\\u0085\\u2028\\u2029])?\\Z)"
    )


# -- n-gram indexes -------------------------------------------------------------------------------


def test_the_vectorised_token_and_ngram_cutters_equal_the_per_string_ones():
    # ASCII values are cut with numpy over Arrow's buffers, the others one string at a time:
    # the sets must be the same as the per-string definition, with and without case folding.
    rng = np.random.default_rng(7)
    mixed, plain = list("aAbBzZ09 _-/.?=\tÜüİıΣσςß日本\u0301x"), list("aAbB09 _-.")
    for trial in range(400):
        alphabet = mixed if trial % 2 else plain
        values = [
            "".join(rng.choice(alphabet, rng.integers(0, 13))) for _ in range(rng.integers(0, 7))
        ]
        array = pa.array([v.encode() for v in values] + [None], pa.binary())
        for folded in (False, True):
            expected = sorted(t.encode() for t in text.index_tokens(values, not folded))
            assert text.index_tokens_of(array, not folded).to_pylist() == expected
            for n in (2, 3, 8):
                got = text.index_ngrams_of(array, n, not folded).to_pylist()
                assert sorted(got) == sorted(text.index_ngrams(values, n, not folded).to_pylist())


def test_ngram_indexes_need_every_ngram_of_long_enough_literals():
    for kind in ("ngram_bloom_filter", "ngram_bitmap"):
        ix = index(kind, "string", LOG)
        assert kept(ix, like("%meout af%")) == ["a"], kind
        assert kept(ix, leaf("contains", value="uests")) == [], kind
        assert kept(ix, like("%ne%")) == ["a", "b", "c"], kind  # shorter than n: kept
        assert kept(ix, leaf("ends_with", value="ALICE")) == ["a"], kind
        assert kept(ix, like("%alice", fold="lower")) == ["a"], kind
        assert kept(ix, like("%straße", fold="lower")) == ["c"], kind
        assert kept(ix, like("%STRASSE", fold="upper")) == ["a", "b", "c"], kind
        pairs = index(kind, "string", LOG, {"n": "2", "case_sensitive": "true"})
        assert kept(pairs, like("%ne%")) == ["a", "b"], kind
        assert kept(pairs, like("%NE%")) == [], kind


# -- blobs, candidates, the predicate tree --------------------------------------------------------


def test_a_blob_records_its_spec_and_gives_its_entries_back():
    spec = validate_spec("ix", "bitmap", ["c"], {}, {"c": "int"})
    entries = [
        ("a", build_entry(spec, "int", pa.array([1]))),
        ("b", build_entry(spec, "int", None)),
    ]
    blob = encode_blob(spec, "int", [*entries, ("a", entries[0][1])])
    assert BLOB_TYPE == "sparkext-skipping-index-v1"
    assert blob_spec(blob) == (spec, "int")
    assert blob_entries(blob) == entries
    loaded = decode_blob(blob)
    assert (loaded.spec, loaded.column_type, list(loaded.paths)) == (spec, "int", ["a", "b"])
    assert loaded.nbytes > 0


def test_unlisted_candidates_are_kept_and_used_names_the_answering_indexes():
    ids = index("bloom_filter", "bigint", {"a": [1], "b": [2]}, column="id")
    names = index("bitmap", "string", {"a": ["x"], "b": ["y"]}, column="name")
    both = {
        "op": "or",
        "args": [
            {"op": "eq", "col": "id", "type": "bigint", "value": 1},
            {"op": "eq", "col": "name", "type": "string", "value": "y"},
        ],
    }
    pruned = prune([names, ids], both, ["z", "b", "a"])
    assert pruned.keep.tolist() == [True, True, True]
    assert pruned.used == ("bitmap, name", "bloom_filter, id")
    pruned = prune([names, ids], {"op": "and", "args": both["args"]}, ["z", "b", "a"])
    assert pruned.keep.tolist() == [True, False, False]
    pruned = prune([ids], {"op": "unknown"}, ["a"])
    assert pruned.keep.tolist() == [True] and pruned.used == ()
    assert prune([ids], json.dumps(eq(2, "bigint", col="id")), []).keep.tolist() == []


def test_several_indexes_on_one_column_each_answer():
    a = index("bloom_filter", "string", {"f": ["needle in hay"], "g": ["hay"]})
    b = index("token_bitmap", "string", {"f": ["needle in hay"], "g": ["hay"]})
    pruned = prune([a, b], like("%needle%"), ["f", "g"])
    assert pruned.keep.tolist() == [True, False] and pruned.used == ("token_bitmap, c",)


def test_not_is_pushed_down_with_sql_null_rules():
    assert parse({"op": "not", "arg": eq(None)}) == FALSE
    assert parse({"op": "not", "arg": {"op": "unknown"}}) == TRUE
    assert parse({"op": "not", "arg": like("a%")}) == TRUE
    assert parse({"op": "not", "arg": {"op": "not", "arg": eq(1, "int")}}) == Leaf(
        "eq", "c", "int", 1
    )
    tree = parse(
        {
            "op": "not",
            "arg": {"op": "or", "args": [leaf("lt", "int", value=1), leaf("gt", "int", value=9)]},
        }
    )
    assert tree == Leaf("range", "c", "int", bounds=(("ge", 1), ("le", 9)))
    assert parse({"op": "and", "args": [eq(1, "int"), {"op": "bogus"}]}) == Leaf(
        "eq", "c", "int", 1
    )
    assert parse({"op": "or", "args": [leaf("in", "int", values=[None]), eq(2, "int")]}) == Leaf(
        "eq", "c", "int", 2
    )
    assert isinstance(parse({"op": "and", "args": [eq(1, "int"), eq(2, "int", col="d")]}), All)


def test_prune_of_2000_files_is_fast():
    """Prints (does not assert) prune()'s time for 2,000 files, 7 indexes and a 100-value IN."""
    rng = np.random.default_rng(7)
    words = np.array(["alpha", "beta", "error", "timeout", "reset", "login", "ok", "retry"])
    columns = {"id": "bigint", "status": "string", "ts": "timestamp", "msg": "string"}
    specs = [
        validate_spec("a", "bloom_filter", ["id"], {}, columns),
        validate_spec("b", "bitmap", ["status"], {}, columns),
        validate_spec("c", "bloom_range_filter", ["ts"], {}, columns),
        validate_spec("d", "token_bloom_filter", ["msg"], {}, columns),
        validate_spec("e", "token_bitmap", ["msg"], {}, columns),
        validate_spec("f", "ngram_bloom_filter", ["msg"], {}, columns),
        validate_spec("g", "ngram_bitmap", ["status"], {}, columns),
    ]
    entries = {s.name: [] for s in specs}
    paths = [f"s3://bucket/db/t/data/part-{f:05d}.parquet" for f in range(2000)]
    for f, path in enumerate(paths):
        data = {
            "id": pa.array(f * 1000 + rng.integers(0, 1000, 50)),
            "status": pa.array(rng.choice(["ok", "failed", f"s{f % 50}"], 50)),
            "ts": pa.array(f * 10**9 + rng.integers(0, 10**9, 50), pa.timestamp("us", "UTC")),
            "msg": pa.array([" ".join(rng.choice(words, 4)) + f" f{f}" for _ in range(50)]),
        }
        for s in specs:
            entries[s.name].append((path, build_entry(s, columns[s.column], data[s.column])))
    loaded = [decode_blob(encode_blob(s, columns[s.column], entries[s.name])) for s in specs]
    predicate = {
        "op": "and",
        "args": [
            leaf("in", "bigint", col="id", values=rng.integers(0, 2_000_000, 100).tolist()),
            {"op": "or", "args": [eq("s7", col="status"), like("%timeout%", col="msg")]},
            leaf("ge", "timestamp", col="ts", value=5 * 10**9),
            leaf("lt", "timestamp", col="ts", value=1500 * 10**9),
            like("% error %", col="msg"),
        ],
    }
    text = json.dumps(predicate)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        pruned = prune(loaded, text, paths)
        best = min(best, time.perf_counter() - start)
    print(
        f"\nprune(): {best * 1000:.1f} ms for 2,000 files, 7 indexes, a 100-value IN "
        f"(kept {pruned.kept}; used {', '.join(pruned.used)})"
    )
    assert len(pruned.used) == 6

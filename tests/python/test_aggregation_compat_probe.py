"""Aggregation expressions and stages as MongoDB 7.0 documents them: accumulators used
as expressions, $filter's limit, argument errors of $map/$filter/$let/$reduce/$switch
and of the object-form string operators, $convert's target types, $pow with a negative
exponent, $dateFromParts mixing ISO and natural parts, %b/%B in $dateToString,
$binarySize and $bsonSize."""

import datetime as dt

import pytest
from bson import Binary, Decimal128, Int64
from pymongo.errors import OperationFailure


_loaded = {}


def _load(db, doc):
    """Holds exactly `doc` in db.c (rewritten only when it changes)."""
    doc = doc or {"_id": 1}
    if _loaded.get(db.name) != doc:
        db.c.delete_many({})
        db.c.insert_one(dict(doc))
        _loaded[db.name] = doc


def project(db, expr, doc=None):
    """Evaluates one expression on one document."""
    _load(db, doc)
    return list(db.c.aggregate([{"$project": {"_id": 0, "r": expr}}]))[0].get("r", "missing")


def error(db, expr):
    """The error of evaluating one expression on one document."""
    _load(db, None)
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$project": {"r": expr}}]))
    return e.value


def assert_error(db, expr, code, message, code_name=None):
    e = error(db, expr)
    assert e.code == code, (expr, e)
    assert e.details["codeName"] == (code_name or f"Location{code}")
    assert message in e.details["errmsg"], (expr, e.details["errmsg"])


def test_accumulators_as_expressions_work_on_an_array_operand_or_on_their_operands(db):
    doc = {"_id": 1, "a": [1, 2, 3], "s": [1, "x", None]}
    cases = [
        ({"$sum": "$a"}, 6),
        ({"$sum": [1, 2, "x"]}, 3),
        # With several operands an array operand is a value, not numeric: skipped.
        ({"$sum": [[1, 2], 3]}, 3),
        ({"$sum": []}, 0),
        ({"$sum": "$s"}, 1),
        ({"$avg": "$a"}, 2.0),
        ({"$avg": []}, None),
        ({"$max": "$a"}, 3),
        ({"$min": [4, None, "$missing", 2]}, 2),
        # BSON order: strings sort after numbers.
        ({"$max": [1, None, "a"]}, "a"),
        ({"$max": [None]}, None),
        ({"$stdDevPop": [1, 2, 3, 4]}, 1.118033988749895),
        ({"$stdDevSamp": [1]}, None),
        ({"$stdDevSamp": [2, 4]}, 1.4142135623730951),
    ]
    for expr, want in cases:
        got = project(db, expr, doc)
        assert got == want and type(got) is type(want), (expr, got)
    # Integer sums promote to long past the int range; a decimal makes a decimal.
    got = project(db, {"$sum": [2147483647, 1]})
    assert got == Int64(2147483648) and isinstance(got, Int64)
    assert project(db, {"$avg": [Decimal128("1"), 2]}) == Decimal128("1.5")


def test_filter_limit_keeps_the_first_matches_and_rejects_bad_limits(db):
    arr = [1, 2, 3, 4, 5]
    assert project(db, {"$filter": {"input": arr, "cond": {"$gt": ["$$this", 1]}, "limit": 2}}) == [2, 3]
    assert project(db, {"$filter": {"input": arr, "as": "x", "cond": {"$gt": ["$$x", 3]}, "limit": Int64(5)}}) == [4, 5]
    assert project(db, {"$filter": {"input": arr, "cond": True, "limit": 2.0}}) == [1, 2]
    # A null limit means no limit.
    assert project(db, {"$filter": {"input": arr, "cond": True, "limit": None}}) == arr
    assert_error(db, {"$filter": {"input": arr, "cond": True, "limit": 0}}, 327392,
                 "$filter: limit must be greater than 0: 0")
    assert_error(db, {"$filter": {"input": arr, "cond": True, "limit": -1}}, 327392,
                 "$filter: limit must be greater than 0: -1")
    assert_error(db, {"$filter": {"input": arr, "cond": True, "limit": 1.5}}, 327391,
                 "$filter: limit must be represented as a 32-bit integral value: 1.5")
    assert_error(db, {"$filter": {"input": arr, "cond": True, "limit": "a"}}, 327391,
                 "$filter: limit must be represented as a 32-bit integral value")


def test_map_filter_let_reduce_argument_errors_carry_their_own_codes(db):
    cases = [
        ({"$filter": 1}, 28646, "$filter only supports an object as its argument"),
        ({"$filter": {"input": [], "cond": True, "x": 1}}, 28647, "Unrecognized parameter to $filter: x"),
        ({"$filter": {"cond": True}}, 28648, "Missing 'input' parameter to $filter"),
        ({"$filter": {"input": []}}, 28650, "Missing 'cond' parameter to $filter"),
        ({"$filter": {"input": "abc", "cond": True}}, 28651, "input to $filter must be an array not string"),
        ({"$map": 1}, 16878, "$map only supports an object as its argument"),
        ({"$map": {"input": [], "in": 1, "x": 1}}, 16879, "Unrecognized parameter to $map: x"),
        ({"$map": {"in": 1}}, 16880, "Missing 'input' parameter to $map"),
        ({"$map": {"input": []}}, 16882, "Missing 'in' parameter to $map"),
        ({"$map": {"input": 5, "in": 1}}, 16883, "input to $map must be an array not int"),
        ({"$map": {"input": [1], "as": "Bad", "in": 1}}, 16867,
         "'Bad' starts with an invalid character for a user variable name"),
        ({"$let": 1}, 16874, "$let only supports an object as its argument"),
        ({"$let": {"vars": {}, "in": 1, "x": 1}}, 16875, "Unrecognized parameter to $let: x"),
        ({"$let": {"in": 1}}, 16876, "Missing 'vars' parameter to $let"),
        ({"$let": {"vars": {}}}, 16877, "Missing 'in' parameter to $let"),
        ({"$let": {"vars": {"Up": 1}, "in": 1}}, 16867,
         "'Up' starts with an invalid character for a user variable name"),
        ({"$reduce": 1}, 40075, "$reduce requires an object as an argument, found: int"),
        ({"$switch": {"branches": [{"case": True, "then": 1, "x": 1}]}}, 40063,
         "$switch found an unknown argument to a branch: x"),
    ]
    for expr, code, message in cases:
        assert_error(db, expr, code, message)


def test_object_form_string_operators_report_unknown_arguments_with_their_codes(db):
    cases = [
        ({"$regexFind": {"input": "a", "regex": "a", "foo": 1}}, 31024, "$regexFind found an unknown argument: foo"),
        ({"$regexMatch": {"input": "a", "regex": "a", "foo": 1}}, 31024, "$regexMatch found an unknown argument: foo"),
        ({"$trim": {"input": "a", "foo": 1}}, 50694, "$trim found an unknown argument: foo"),
        ({"$ltrim": {"input": "a", "foo": 1}}, 50694, "$ltrim found an unknown argument: foo"),
        ({"$replaceAll": {"input": "a", "find": "a", "replacement": "b", "x": 1}}, 51750,
         "$replaceAll found an unknown argument: x"),
        ({"$zip": {"inputs": [[1]], "x": 1}}, 34464, "$zip found an unknown argument: x"),
        ({"$sortArray": {"input": [1], "sortBy": 1, "x": 1}}, 2942501, "$sortArray found an unknown argument: x"),
    ]
    for expr, code, message in cases:
        assert_error(db, expr, code, message)
    # $convert has no 'format' argument in 7.0.
    assert_error(db, {"$convert": {"input": 1, "to": "string", "format": "base64"}}, 9,
                 "$convert found an unknown argument: format", "FailedToParse")


def test_convert_checks_its_target_type_before_the_input_and_outside_on_error(db):
    # A BSON type it cannot convert to fails to parse, whatever onError says.
    for to in ("binData", "regex", "object", "array", "null", "timestamp", 5):
        name = "binData" if to == 5 else to
        assert_error(db, {"$convert": {"input": "abc", "to": to, "onError": 0}}, 9,
                     f"$convert with unsupported 'to' type: {name}", "FailedToParse")
    assert_error(db, {"$convert": {"input": 1, "to": 100}}, 9,
                 "In $convert, numeric value for 'to' does not correspond to a BSON type: 100", "FailedToParse")
    assert_error(db, {"$convert": {"input": 1, "to": 16.5}}, 9,
                 "In $convert, numeric 'to' argument is not an integer", "FailedToParse")
    assert_error(db, {"$convert": {"input": 1, "to": {"a": 1}}}, 9,
                 "$convert's 'to' argument must be a string or number, but is object", "FailedToParse")
    # An unknown type name fails even when the input is null.
    assert_error(db, {"$convert": {"input": None, "to": "foo"}}, 2, "Unknown type name: foo", "BadValue")
    # A null input wins over a null 'to'; a null 'to' alone gives null.
    assert project(db, {"$convert": {"input": None, "to": None, "onNull": "N"}}) == "N"
    assert project(db, {"$convert": {"input": 1, "to": None, "onNull": "N"}}) is None
    assert project(db, {"$convert": {"input": "12", "to": 16.0}}) == 12
    assert project(db, {"$convert": {"input": "x", "to": "int", "onError": -1}}) == -1


def test_pow_with_a_negative_exponent_stays_integral_only_for_a_base_of_one_or_minus_one(db):
    cases = [
        ({"$pow": [-1, -3]}, -1, int),
        ({"$pow": [-1, -2]}, 1, int),
        ({"$pow": [1, -5]}, 1, int),
        ({"$pow": [Int64(-1), -3]}, Int64(-1), Int64),
        ({"$pow": [2, -1]}, 0.5, float),
        ({"$pow": [2, 10]}, 1024, int),
    ]
    for expr, want, typ in cases:
        got = project(db, expr)
        assert got == want and type(got) is typ, (expr, got)
    assert_error(db, {"$pow": [0, -1]}, 28764, "$pow cannot take a base of 0 and a negative exponent")


def test_date_from_parts_refuses_mixing_iso_and_natural_parts(db):
    msg = "$dateFromParts does not allow mixing natural dates with ISO dates"
    assert_error(db, {"$dateFromParts": {"year": 2017, "isoWeek": 1}}, 40489, msg)
    assert_error(db, {"$dateFromParts": {"year": 2017, "isoDayOfWeek": 1}}, 40489, msg)
    assert_error(db, {"$dateFromParts": {"isoWeekYear": 2017, "month": 1}}, 40489, msg)
    assert_error(db, {"$dateFromParts": {"isoWeekYear": 2017, "day": 1}}, 40489, msg)
    # Neither year nor isoWeekYear: that error comes first.
    assert_error(db, {"$dateFromParts": {"month": 1, "isoWeek": 1}}, 40516,
                 "$dateFromParts requires either 'year' or 'isoWeekYear' to be present")
    assert project(db, {"$dateFromParts": {"isoWeekYear": 2017, "isoWeek": 1, "isoDayOfWeek": 1}}) == dt.datetime(2017, 1, 2)


def test_date_to_string_formats_month_names_with_b_and_capital_b(db):
    d = dt.datetime(2021, 9, 3, 4, 5, 6)
    assert project(db, {"$dateToString": {"date": d, "format": "%b %B %d"}}) == "Sep September 03"
    assert project(db, {"$dateToString": {"date": dt.datetime(2021, 5, 1), "format": "%b|%B"}}) == "May|May"


def test_binary_size_and_bson_size_measure_bytes_and_reject_other_types(db):
    assert project(db, {"$binarySize": "héllo"}) == 6
    assert project(db, {"$binarySize": Binary(b"\x00\x01\x02")}) == 3
    assert project(db, {"$binarySize": None}) is None
    assert project(db, {"$bsonSize": {"$literal": {"a": 1}}}) == 12
    assert project(db, {"$bsonSize": "$$ROOT"}, {"_id": 1}) == 14
    assert project(db, {"$bsonSize": "$missing"}) is None
    assert_error(db, {"$binarySize": 5}, 51276, "$binarySize requires a string or BinData argument, found: int")
    assert_error(db, {"$bsonSize": "x"}, 31393, "$bsonSize requires a document input, found: string")


def stage_error(db, pipeline, docs=None):
    """The error of running `pipeline` on db.c holding `docs`."""
    db.c.drop()
    _loaded.pop(db.name, None)
    db.c.insert_many(docs or [{"_id": 1}])
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate(pipeline))
    return e.value


def test_lookup_checks_let_names_let_without_pipeline_as_path_and_foreign_databases(db):
    db.o.insert_many([{"_id": 1, "k": 1}, {"_id": 2, "k": 2}])
    cases = [
        ({"from": "o", "let": {"K": "$k"}, "pipeline": [], "as": "r"}, 16867,
         "'K' starts with an invalid character for a user variable name"),
        ({"from": "o", "let": {"k": "$k"}, "localField": "k", "foreignField": "k", "as": "r"}, 9,
         "$lookup with a 'let' argument must also specify 'pipeline'"),
        ({"from": "o", "localField": "k", "pipeline": [], "as": "r"}, 9,
         "$lookup requires both or neither of 'localField' and 'foreignField' to be specified"),
        ({"from": "o", "localField": "k", "as": "r"}, 9,
         "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified"),
        ({"from": "o", "localField": "k", "foreignField": "k", "as": "$r"}, 16410,
         "FieldPath field names may not start with '$'"),
        ({"from": {"db": "other", "coll": "o"}, "localField": "k", "foreignField": "k", "as": "r"}, 9,
         "$lookup with syntax {from: {db:<>, coll:<>},..} is not supported for db: other and coll: o"),
    ]
    for spec, code, message in cases:
        e = stage_error(db, [{"$lookup": spec}], [{"_id": 1, "k": 1}])
        assert e.code == code, (spec, e)
        assert message in e.details["errmsg"], (spec, e.details["errmsg"])
    # localField/foreignField together with a pipeline (5.0+) still joins.
    got = list(db.c.aggregate([{"$lookup": {"from": "o", "localField": "k", "foreignField": "k",
                                            "let": {"kk": "$k"},
                                            "pipeline": [{"$project": {"_id": 1, "kk": "$$kk"}}],
                                            "as": "r"}}]))
    assert got == [{"_id": 1, "k": 1, "r": [{"_id": 1, "kk": 1}]}]


def test_exp_moving_avg_skips_non_numbers_keeping_the_average_and_checks_its_arguments(db):
    docs = [{"_id": i, "t": i, "v": v} for i, v in enumerate([None, 5, None, "x", 3, Decimal128("1")])]
    db.c.insert_many(docs)
    got = [d["e"] for d in db.c.aggregate([
        {"$setWindowFields": {"sortBy": {"t": 1}, "output": {"e": {"$expMovingAvg": {"input": "$v", "alpha": 0.5}}}}},
        {"$sort": {"_id": 1}}])]
    # Null before the first number; a non-number keeps the average; a decimal makes it decimal.
    assert got == [None, 5.0, 5.0, 5.0, 4.0, Decimal128("2.5")]
    two = ("$expMovingAvg sub object must have exactly two fields: An 'input' field, "
           "and either an 'N' field or an 'alpha' field")
    cases = [
        ({"$expMovingAvg": {"input": "$v", "alpha": 0.5}, "window": {"documents": [-1, 0]}},
         "$expMovingAvg must have exactly one argument that is an object"),
        ({"$expMovingAvg": {"input": "$v", "alpha": 0.5, "N": 2}}, two),
        ({"$expMovingAvg": {"input": "$v", "foo": 2}}, "Got unrecognized field in $expMovingAvg" + two),
        ({"$expMovingAvg": {"input": "$v", "N": 2.5}},
         "'N' field must be an integer, but found  N: 2.5. To use a non-integer, use the 'alpha' argument instead"),
        ({"$expMovingAvg": {"input": "$v", "N": "a"}}, "'N' field must be an integer, but found type string"),
        ({"$expMovingAvg": {"input": "$v", "N": 0}}, "'N' must be greater than zero. Got 0"),
        ({"$expMovingAvg": {"input": "$v", "alpha": "a"}}, "'alpha' must be a number"),
        ({"$expMovingAvg": {"input": "$v", "alpha": 1}}, "'alpha' must be between 0 and 1 (exclusive), found alpha: 1"),
        ({"documents": [-1, 0]}, "Expected a $-prefixed window function, documents"),
    ]
    for out, message in cases:
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$setWindowFields": {"sortBy": {"t": 1}, "output": {"e": out}}}]))
        assert e.value.code == 9 and e.value.details["errmsg"] == message, (out, e.value)


def test_window_functions_needing_a_sort_name_themselves_when_it_is_missing(db):
    db.c.insert_many([{"_id": 1, "t": 1, "v": 1}, {"_id": 2, "t": 2, "v": 2}])
    cases = [
        ({"$expMovingAvg": {"input": "$v", "N": 2}}, None, "$expMovingAvg requires an explicit 'sortBy'"),
        ({"$shift": {"output": "$v", "by": 1}}, None, "'$shift' requires a sortBy"),
        ({"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}}, {"t": 1, "_id": 1},
         "$derivative requires a non-compound sortBy"),
        ({"$integral": {"input": "$v"}}, {"t": 1, "_id": 1}, "$integral requires a non-compound sortBy"),
    ]
    for out, sort, message in cases:
        spec = {"output": {"e": out}}
        if sort:
            spec["sortBy"] = sort
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$setWindowFields": spec}]))
        assert e.value.code == 9 and e.value.details["errmsg"] == message, (out, e.value)


def test_fill_writes_null_where_locf_or_linear_cannot_fill_and_value_keeps_order(db):
    db.c.insert_many([{"_id": 1, "t": 1, "g": "b"}, {"_id": 2, "t": 2, "v": 2, "g": "a"},
                      {"_id": 3, "t": 3, "g": "b"}, {"_id": 4, "t": 4, "v": 4, "g": "a"},
                      {"_id": 5, "t": 5, "g": "b"}])
    def fill(spec):
        return [(d["_id"], d.get("v", "missing")) for d in db.c.aggregate([{"$fill": spec}])]
    # $fill is $setWindowFields with $linearFill / $locf: the field is always written.
    assert fill({"sortBy": {"t": 1}, "output": {"v": {"method": "linear"}}}) == [
        (1, None), (2, 2), (3, 3.0), (4, 4), (5, None)]
    assert fill({"sortBy": {"t": 1}, "output": {"v": {"method": "locf"}}}) == [
        (1, None), (2, 2), (3, 2), (4, 4), (5, 4)]
    # Only 'value' outputs: an $addFields, so no partitioning or sorting of the documents.
    assert fill({"partitionBy": "$g", "sortBy": {"t": -1}, "output": {"v": {"value": 0}}}) == [
        (1, 0), (2, 2), (3, 0), (4, 4), (5, 0)]
    cases = [
        ({"sortBy": {"t": 1}, "output": {"v": {"method": "locf", "value": 1}}}, 6050201,
         "Each fill output specification must have exactly one of 'method' or 'value' fields, not both"),
        ({"output": {"v": 1}}, 6050200, "Each fill output specification must be an object with exactly one field"),
        ({"sortBy": {"t": 1}, "partitionBy": "$g", "partitionByFields": ["g"], "output": {"v": {"method": "locf"}}},
         6050204, "Maximum one of 'partitionBy' and 'partitionByFields can be specified in '$fill'"),
    ]
    for spec, code, message in cases:
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$fill": spec}]))
        assert e.value.code == code and e.value.details["errmsg"] == message, (spec, e.value)


def test_to_string_of_a_double_prints_six_significant_digits_like_printf_g(db):
    cases = [
        (2.5, "2.5"),
        (0.1, "0.1"),
        (1.23456789, "1.23457"),
        (123456.0, "123456"),
        (1234567.0, "1.23457e+06"),
        (1e20, "1e+20"),
        (1e-7, "1e-07"),
        (-0.0, "-0"),
        (float("inf"), "Infinity"),
    ]
    for value, want in cases:
        assert project(db, {"$toString": value}) == want, value
        assert project(db, {"$convert": {"input": value, "to": "string"}}) == want, value
    # $toUpper coerces a double the same way.
    assert project(db, {"$toUpper": 1.23456789}) == "1.23457"
    # Integers and decimals keep all their digits.
    assert project(db, {"$toString": Int64(1234567890123)}) == "1234567890123"
    assert project(db, {"$toString": Decimal128("1.234567890")}) == "1.234567890"


def test_to_decimal_follows_the_documented_conversions(db):
    # The examples of MongoDB's $toDecimal page.
    cases = [
        (True, "1"),
        (False, "0"),
        (2.5, "2.50000000000000"),
        (5, "5"),
        (Int64(10000), "10000"),
        ("-5.5", "-5.5"),
        ("1.50", "1.50"),
        (dt.datetime(2018, 3, 27, 5, 4, 47, 890000), "1522127087890"),
    ]
    for value, want in cases:
        got = project(db, {"$toDecimal": value})
        assert isinstance(got, Decimal128) and str(got) == want, (value, got)
    assert project(db, {"$convert": {"input": "abc", "to": "decimal", "onError": "E"}}) == "E"


def test_case_operators_change_ascii_letters_only(db):
    assert project(db, {"$toUpper": "héllo"}) == "HéLLO"
    assert project(db, {"$toLower": "HÉLLO"}) == "hÉllo"
    # $strcasecmp compares the upper-cased bytes.
    assert project(db, {"$strcasecmp": ["é", "É"]}) == 1
    assert project(db, {"$strcasecmp": ["a_", "A["]}) == 1
    assert project(db, {"$strcasecmp": ["abc", "ABC"]}) == 0


def test_range_separates_non_numeric_from_non_integral_arguments(db):
    cases = [
        ([0, "a"], 34445, "$range requires a numeric ending value, found value of type: string"),
        ([0, 10.5], 34446, "$range requires an ending value that can be represented as a 32-bit integer, found value: 10.5"),
        (["a", 3], 34443, "$range requires a numeric starting value, found value of type: string"),
        ([1.5, 3], 34444, "$range requires a starting value that can be represented as a 32-bit integer, found value: 1.5"),
        ([0, 3, "x"], 34447, "$range requires a numeric step value, found value of type: string"),
        ([0, 3, 0.5], 34448, "$range requires a step value that can be represented as a 32-bit integer, found value: 0.5"),
    ]
    for args, code, message in cases:
        assert_error(db, {"$range": args}, code, message)
    assert project(db, {"$range": [0, 10, 3]}) == [0, 3, 6, 9]
    assert project(db, {"$range": [0, 4.0]}) == [0, 1, 2, 3]


def test_shift_requires_a_constant_default_and_an_integer_by(db):
    db.c.insert_many([{"_id": i, "t": i, "v": i} for i in range(3)])

    def shift(spec, window=None):
        out = {"$shift": spec}
        if window:
            out["window"] = window
        return [d.get("e") for d in db.c.aggregate([
            {"$setWindowFields": {"sortBy": {"t": 1}, "output": {"e": out}}}, {"$sort": {"_id": 1}}])]

    # A constant expression is folded; 'by' may be an integral double.
    assert shift({"output": "$v", "by": 1, "default": {"$add": [1, 2]}}) == [1, 2, 3]
    assert shift({"output": "$v", "by": 1.0}) == [1, 2, None]
    cases = [
        ({"output": "$v", "by": 1, "default": "$v"}, None, "'$shift:default' expression must yield a constant value."),
        ({"output": "$v", "by": 1.5}, None, "'$shift:by' field must be an integer, but found  by: 1.5"),
        ({"output": "$v", "by": 1, "x": 1}, None, "Unknown argument in $shift"),
        ({"output": "$v"}, None, "$shift requires 'by' as an integer value."),
        ({"by": 1}, None, "$shift requires an 'output' expression."),
        ({"output": "$v", "by": 1}, {"documents": [-1, 0]}, "$shift does not accept a 'window' field"),
    ]
    for spec, window, message in cases:
        with pytest.raises(OperationFailure) as e:
            shift(spec, window)
        assert e.value.code == 9 and e.value.details["errmsg"] == message, (spec, e.value)


def test_n_accumulators_validate_n_like_mongodb_in_group_and_as_expressions(db):
    cases = [
        ({"n": 0, "input": [1]}, 5787908, "'n' must be greater than 0, found 0"),
        ({"n": 1.5, "input": [1]}, 5787903, "Value for 'n' must be of integral type, but found 1.5"),
        ({"n": "a", "input": [1]}, 5787902, 'Value for \'n\' must be of integral type, but found "a"'),
        ({"input": [1]}, 5787906, "Missing value for 'n'"),
        ({"n": 1}, 5787907, "Missing value for 'input'"),
        ({"n": 1, "input": [1], "x": 1}, 5787901, "Unknown argument for 'n' operator: x"),
    ]
    for spec, code, message in cases:
        assert_error(db, {"$firstN": spec}, code, message)
    assert project(db, {"$minN": {"n": Int64(2), "input": [3, 1, 2]}}) == [1, 2]
    db.c.insert_many([{"_id": 2, "g": 1, "v": 5}, {"_id": 3, "g": 1, "v": 7}])
    for spec, code, message in [
        ({"input": "$v", "n": 0}, 5787908, "'n' must be greater than 0, found 0"),
        ({"input": "$v", "n": 2.5}, 5787903, "Value for 'n' must be of integral type, but found 2.5"),
        ({"input": "$v"}, 5787906, "Missing value for 'n'"),
        ({"input": "$v", "n": 1, "x": 1}, 5787901, "Unknown argument for 'n' operator: x"),
    ]:
        with pytest.raises(OperationFailure) as e:
            list(db.c.aggregate([{"$group": {"_id": "$g", "r": {"$lastN": spec}}}]))
        assert e.value.code == code and e.value.details["errmsg"] == message, (spec, e.value)
    got = list(db.c.aggregate([{"$match": {"g": 1}}, {"$group": {"_id": "$g", "r": {"$maxN": {"input": "$v", "n": 1}}}}]))
    assert got == [{"_id": 1, "r": [7]}]


def test_replace_root_specification_errors_follow_the_idl_parser(db):
    cases = [
        (1, 40229, "Location40229", "expected an object as specification for $replaceRoot stage, got int"),
        ({"foo": 1}, 40415, "IDLUnknownField", "BSON field '$replaceRoot.foo' is an unknown field."),
        ({"newRoot": "$a", "foo": 1}, 40415, "IDLUnknownField", "BSON field '$replaceRoot.foo' is an unknown field."),
        ({}, 40414, "IDLFailedToParse", "BSON field '$replaceRoot.newRoot' is missing but a required field"),
    ]
    for spec, code, name, message in cases:
        e = stage_error(db, [{"$replaceRoot": spec}])
        assert (e.code, e.details["codeName"], e.details["errmsg"]) == (code, name, message), spec


def test_derivative_and_integral_refuse_missing_inputs_and_mismatched_sort_types(db):
    t0 = dt.datetime(2024, 1, 1)
    db.c.insert_many([{"_id": i, "t": t0 + dt.timedelta(hours=i), "n": i, "v": v}
                      for i, v in enumerate([1, 3, 7])])

    def window(out, sort=None):
        return [d["e"] for d in db.c.aggregate([
            {"$setWindowFields": {"sortBy": sort or {"t": 1}, "output": {"e": out}}}, {"$sort": {"_id": 1}}])]

    # rise / run in milliseconds, then times the unit: floating point as MongoDB computes it.
    got = window({"$derivative": {"input": "$v", "unit": "hour"}, "window": {"documents": [-1, 0]}})
    assert got[0] is None and got[1:] == pytest.approx([2.0, 4.0], rel=1e-12)
    assert window({"$integral": {"input": "$v", "unit": "hour"},
                   "window": {"documents": ["unbounded", "current"]}}) == [0.0, 2.0, 7.0]
    assert window({"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}}, {"n": 1}) == [None, 2.0, 4.0]
    cases = [
        ({"$derivative": {"input": "$v"}, "window": {"documents": [-1, 0]}}, None, 5624901,
         "$derivative where the sortBy is a Date requires an 'unit'"),
        ({"$derivative": {"input": "$v", "unit": "hour"}, "window": {"documents": [-1, 0]}}, {"n": 1}, 5624900,
         "$derivative with 'unit' expects the sortBy field to be a Date"),
        ({"$integral": {"input": "$v", "unit": "hour"}}, {"n": 1}, 5423901, None),
        ({"$integral": {"input": "$v"}}, None, 5423902, None),
    ]
    for out, sort, code, message in cases:
        with pytest.raises(OperationFailure) as e:
            window(out, sort)
        assert e.value.code == code, (out, e.value)
        if message:
            assert e.value.details["errmsg"] == message
    # A missing input at a window's end is an error, not a gap.
    db.c.insert_one({"_id": 3, "t": t0 + dt.timedelta(hours=3), "n": 3})
    with pytest.raises(OperationFailure) as e:
        window({"$derivative": {"input": "$v", "unit": "hour"}, "window": {"documents": [-1, 0]}})
    assert (e.value.code, e.value.details["errmsg"]) == (5624903, "$derivative input must not be null or missing")
    with pytest.raises(OperationFailure) as e:
        window({"$integral": {"input": "$v", "unit": "hour"}, "window": {"documents": ["unbounded", "current"]}})
    assert e.value.code == 5423900


def test_let_and_map_may_rebind_current_but_no_other_system_variable(db):
    doc = {"_id": 1, "a": {"b": 5}, "b": 1, "arr": [{"x": 1}, {"x": 2}]}
    assert project(db, {"$let": {"vars": {"CURRENT": "$a"}, "in": "$b"}}, doc) == 5
    assert project(db, {"$let": {"vars": {"CURRENT": "$a"}, "in": "$$CURRENT.b"}}, doc) == 5
    assert project(db, {"$let": {"vars": {"CURRENT": "$a"}, "in": "$$ROOT.b"}}, doc) == 1
    assert project(db, {"$map": {"input": "$arr", "as": "CURRENT", "in": "$x"}}, doc) == [1, 2]
    assert_error(db, {"$let": {"vars": {"ROOT": 1}, "in": 1}}, 16867,
                 "'ROOT' starts with an invalid character for a user variable name")

//! The corpus pairs deloop deliberately answers differently, each with the
//! value deloop returns instead and the reason (included by
//! `rescue_conformance.rs`, which asserts every one). Cases from the npm
//! jsonrepair suite (ISC, notice in `corpora/jsonrepair/LICENSE.md`) and the
//! Python json-repair suite (MIT, notice in `corpora/json-repair-py/LICENSE`).

/// One documented difference.
pub struct Difference {
    /// `jsonrepair` or `json-repair-py`.
    pub corpus: &'static str,
    /// Case id (`L<line>` for jsonrepair, the `id` field for json-repair).
    pub id: &'static str,
    /// What deloop returns instead (compact JSON), or `None` for an error.
    pub ours: Option<&'static str>,
    /// Why.
    pub reason: &'static str,
}

const PROSE: &str = "bare text with no JSON structure is prose, not JSON: deloop reports NoJson so the caller substitutes its fallback message, instead of wrapping the words in a string";
const NDJSON: &str = "a sequence of bare scalars (NDJSON of numbers/words) is not model output; deloop only collects top-level objects and arrays, so this is NoJson";
const OPEN_STRING: &str = "an unterminated string keeps its commas and newlines as text: models write raw newlines and commas inside long answers, so a missing closing quote reads as truncation (the answer keeps its text), not as a string ending at the first comma or newline";
const CONCAT: &str = "JavaScript `+` concatenation or comments inside an unterminated string are not model output; the text is kept as written";
const ESCAPE: &str = "the issue requires an invalid escape to keep its backslash (`C:\\Users`), so `\\a` stays `\\a`";
const JSONP: &str = "JSONP or MongoDB wrappers around a bare scalar are not model output; only objects and arrays are looked for inside prose";
const FENCE_IN_BRACKETS: &str = "the brackets around the fence are real structure in the text, so the fenced object stays inside its array";
const REGEX: &str = "JavaScript regular-expression literals are not model output: the slash text is prose (or the bracketed part is the only structure)";
const EMPTY_VALUES: &str = "several top-level values of the same shape are revisions: the last is kept (here all are `{}`), not an array of them";
const REFUSE: &str = "jsonrepair refuses this input; for model output deloop recovers the structure that is there instead of failing (missing values become null, trailing text is skipped)";
const CONTROL: &str = "a raw control character inside a string is kept and escaped on output (models emit them) rather than refused";
const UESCAPE: &str = "an invalid or cut `\\u` escape inside a closed string keeps its backslash as text (decoding rule: invalid escapes are kept) rather than refusing the input";
const PARTIAL_KEY: &str = "a key cut inside an escape keeps the text typed so far (the partial escape is dropped); whitespace inside keys is never trimmed";
const REVISION: &str = "several top-level values of the same kind: empty ones are dropped and the remaining one is kept";
const PROSE_LAST: &str = "values embedded in prose: the last object is the model's final answer (earlier values are drafts), so it is returned alone rather than collected";
const OPEN_CONTAINER: &str = "an opened object is kept as an empty object: truncation closes what is open, nothing is dropped";
const EMPTY_STRING: &str = "a string cut right after its opening quote is kept as an empty string, so streaming prefixes stay consistent";
const MISSING_BRACKET: &str = "a missing opening bracket in the middle of an array is not re-created: the elements stay where they were written";
const AMBIGUOUS_QUOTES: &str = "ambiguous inner quotes: a quote closes a string only where the structure continues after it (`, \"next\"` then `,` or `]`); here it does not, so the quotes stay text";
const COLON_IN_ARRAY: &str =
    "a colon inside an array is dropped: deloop does not invent an object the model did not open";
const TRUNCATED_KEY: &str = "a key cut at the end of the input without a value does not replace the value an earlier identical key already has";
const PYTHON_SET: &str =
    "a Python set literal is not JSON-like model output; its items read as keys with null values";
const WORD_AFTER_STRING: &str = "a word between a string's closing quote and another quote is read as part of the string (the quote before it did not continue the structure)";
const HASH_COMMENT: &str = "`#` starts a comment that runs to the end of the line (Python/YAML style), so the rest of that line is dropped";
const NO_JOIN_NUMBERS: &str =
    "numbers after a key that lacks its colon are not joined into a string";
const MINUS: &str = "a lone `-` is read as the number -0, as jsonrepair does";
const FINAL_QUOTE: &str = "the last quote is followed by `}`, where the structure really continues, so it closes the string instead of staying text";
const CSV_QUOTES: &str = "CSV-style doubled quotes are not model JSON; they are kept as text";
const COLON_INNER: &str = "a quote followed by `:` inside a value is an inner quote (the `\"strict\": true` rule), so the value keeps that text";
const UNQUOTED_COMMA: &str =
    "an unquoted value ends at the first comma, where the structure continues";
const UNQUOTED_BRACE: &str =
    "an unquoted value ends at the first closing brace, where the structure continues";
const OPEN_KEY: &str =
    "a key without its closing quote is kept whole (most likely a key cut by the end of the input)";
const QUAD_QUOTES: &str =
    "four quotes in a row before a key are read as a quoted key (`\"\"`) and the word after it as its value; the second object is not rebuilt around the key that follows";
const NO_MERGE_ARRAYS: &str = "an array after a finished value in an object is not merged into the previous array: deloop ends the object there rather than guess";
const ESCAPE_HEAVY: &str =
    "the escapes are decoded by JSON rules in one pass; the doubled backslashes stay literal";
const NULL_NOT_EMPTY: &str = "a missing value becomes null (as in jsonrepair), not an empty string";
const NO_COLON_REATTACH: &str =
    "after an early closing brace, following members are reattached only when they have a colon";
const COMMENT_WORD: &str = "a bare word between members is dropped only before a quoted `\"key\":`; after a comma inside a value string, `COMMENT \"notes\":` is not recognised as structure";
const DOUBLE_OPEN: &str = "a doubled opening quote keeps the second quote as text";
const NUMERIC_KEY: &str = "after a comma inside a value string, an unquoted key (`5:`) is recognised only when the object already used unquoted keys, since `, word:` is common prose";
const SINGLE_QUOTE_STR: &str = "a single-quoted string holding one double quote is that string";
const NESTED_FENCE: &str =
    "a fenced JSON inside a string value stays text: the value the model wrote is a string";

fn d(
    corpus: &'static str,
    id: &'static str,
    ours: Option<&'static str>,
    reason: &'static str,
) -> Difference {
    Difference {
        corpus,
        id,
        ours,
        reason,
    }
}

/// Every deliberate difference.
#[rustfmt::skip]
pub fn table() -> Vec<Difference> {
    vec![
        d("json-repair-py", "py-011-json_repair-L78", Some(r#"{}"#), REVISION),  // input: "[]{}"
        d("json-repair-py", "py-014-json_repair-L85", Some(r#"{"key":"value"}"#), PROSE_LAST),  // input: "lorem ```json {\"key\":\"value\"} ``` ipsum ```json [1,2,3,True] ``` 42"
        d("json-repair-py", "py-019-parse_array-L13", Some(r#"[{}]"#), OPEN_CONTAINER),  // input: "[{]"
        d("json-repair-py", "py-021-parse_array-L15", Some(r#"[""]"#), EMPTY_STRING),  // input: "[\""
        d("json-repair-py", "py-035-parse_array-L32", Some(r#"{"headers":["A","B","C"],"rows":[["r1a","r1b","r1c"],["r2a","r2b","r2c"],"r3a","r3b","r3c"]}"#), MISSING_BRACKET),  // input: "{\"headers\": [\"A\", \"B\", \"C\"], \"rows\": [[\"r1a\", \"r1b\", \"r1c\"], [\"r2a\", \"
        d("json-repair-py", "py-037-parse_array-L41", Some(r#"{"key":["lorem \"ipsum\" dolor \"sit\" amet, \"consectetur\" \", \"lorem \"ipsum\" dolor","lorem"]}"#), AMBIGUOUS_QUOTES),  // input: "{\"key\": [\"lorem \"ipsum\" dolor \"sit\" amet, \"consectetur\" \", \"lorem \"ipsum\" do
        d("json-repair-py", "py-039-parse_array-L46", Some(r#"["key","value"]"#), COLON_IN_ARRAY),  // input: "[\"key\":\"value\"}]"
        d("json-repair-py", "py-040-parse_array-L47", Some(r#"["key","value"]"#), COLON_IN_ARRAY),  // input: "[\"key\":\"value\"]"
        d("json-repair-py", "py-041-parse_array-L48", Some(r#"["key","value"]"#), COLON_IN_ARRAY),  // input: "[ \"key\":\"value\"]"
        d("json-repair-py", "py-042-parse_array-L49", Some(r#"[{"key":"value"}]"#), TRUNCATED_KEY),  // input: "[{\"key\": \"value\", \"key"
        d("json-repair-py", "py-043-parse_array-L50", Some(r#"{"key1":null,"key2":null}"#), PYTHON_SET),  // input: "{'key1', 'key2'}"
        d("json-repair-py", "py-044-parse_array-L97", Some(r#"["value1\" value2","value3"]"#), WORD_AFTER_STRING),  // input: "[\"value1\" value2\", \"value3\"]"
        d("json-repair-py", "py-045-parse_array-L98", Some(r#"{"bad_one":["Lorem Ipsum\", \"consectetur\" comment"],"good_one":["elit","sed","tempor"]}"#), WORD_AFTER_STRING),  // input: "{\"bad_one\":[\"Lorem Ipsum\", \"consectetur\" comment\" ], \"good_one\":[ \"elit\", \"se
        d("json-repair-py", "py-046-parse_array-L102", Some(r#"{"bad_one":["Lorem Ipsum\",\"consectetur\" comment],\"good_one",["elit","sed","tempor"]]}"#), WORD_AFTER_STRING),  // input: "{\"bad_one\": [\"Lorem Ipsum\",\"consectetur\" comment],\"good_one\": [\"elit\",\"sed\",\
        d("json-repair-py", "py-050-parse_comment-L12", Some(r#"{"key":{"key2":"value2"}}"#), HASH_COMMENT),  // input: "{ \"key\": { \"key2\": \"value2\" # comment }, \"key3\": \"value3\" }"
        d("json-repair-py", "py-060-parse_number-L20", Some(r#"{"key":null}"#), NO_JOIN_NUMBERS),  // input: "{\"key\", 105,12,"
        d("json-repair-py", "py-064-parse_number-L24", Some(r#"[-0.0]"#), MINUS),  // input: "[- "
        d("json-repair-py", "py-077-parse_object-L26", Some(r#"{"key":"v\"alue"}"#), FINAL_QUOTE),  // input: "{\"key\": \"v\"alue\"}"
        d("json-repair-py", "py-081-parse_object-L33", Some(r#"{"\"answer\"":[{"\"answer1\"":"\"5\"","\"traits\"":"'Female aged 60+'"}]}"#), CSV_QUOTES),  // input: "{\"\"answer\"\":[{\"\"traits\"\":''Female aged 60+'',\"\"answer1\"\":\"\"5\"\"}]}"
        d("json-repair-py", "py-084-parse_object-L45", Some(r#"{"a":"{ b\": {} }"}"#), COLON_INNER),  // input: "{ \"a\" : \"{ b\": {} }\" }"
        d("json-repair-py", "py-087-parse_object-L48", Some(r#"{",":null,"lorem":"ipsum"}"#), UNQUOTED_COMMA),  // input: "{\"lorem\": ipsum, sic, datum.\",}"
        d("json-repair-py", "py-093-parse_object-L63", Some(r#"{"text":"words{words in brackets"}"#), UNQUOTED_BRACE),  // input: "{text:words{words in brackets}}"
        d("json-repair-py", "py-094-parse_object-L64", Some(r#"{"text":"words{words in brackets"}"#), UNQUOTED_BRACE),  // input: "{text:words{words in brackets}m}"
        d("json-repair-py", "py-098-parse_object-L68", Some(r#"{"key:\"value":null}"#), OPEN_KEY),  // input: "{\"key:\"value\"}"
        d("json-repair-py", "py-099-parse_object-L69", Some(r#"{"key:value":null}"#), OPEN_KEY),  // input: "{\"key:value}"
        // Issue 12 changed this reading for the better: `lorem": {"ipsum": "sic`
        // is no longer one string value (the `{"ipsum":` in it now reads as an
        // object written into the text, whose quotes do not end the string), so
        // the first object and the second `{"ipsum": "sic"}` both survive.
        d("json-repair-py", "py-100-parse_object-L70", Some(r#"[{"lorem":{"ipsum":"sic"},"\"\"":"lorem"},{"ipsum":"sic"}]"#), QUAD_QUOTES),  // input: "[{\"lorem\": {\"ipsum\": \"sic\"}, \"\"\"\" \"lorem\": {\"ipsum\": \"sic\"}]"
        d("json-repair-py", "py-101-parse_object-L74", Some(r#"{"key":["arrayvalue"]}"#), NO_MERGE_ARRAYS),  // input: "{ \"key\": [\"arrayvalue\"], [\"arrayvalue1\"], [\"arrayvalue2\"], \"key3\": \"value3\" }
        d("json-repair-py", "py-102-parse_object-L78", Some(r#"{"key":[[1,2,3],"a","b"]}"#), NO_MERGE_ARRAYS),  // input: "{ \"key\": [[1, 2, 3], \"a\", \"b\"], [[4, 5, 6], [7, 8, 9]] }"
        d("json-repair-py", "py-103-parse_object-L82", Some(r#"{"key":["arrayvalue"],"key3":"value3\", [\"arrayvalue1"}"#), NO_MERGE_ARRAYS),  // input: "{ \"key\": [\"arrayvalue\"], \"key3\": \"value3\", [\"arrayvalue1\"] }"
        d("json-repair-py", "py-104-parse_object-L86", Some(r#"{"key":"{\\\"key\\\":[\"value\\\"],\"key2\":\"value2\"}"}"#), ESCAPE_HEAVY),  // input: "{\"key\": \"{\\\\\"key\\\\\\\":[\\\"value\\\\\\\"],\\\"key2\\\":\"value2\"}\"}"
        d("json-repair-py", "py-105-parse_object-L90", Some(r#"{"key":null,"key2":"value2"}"#), NULL_NOT_EMPTY),  // input: "{\"key\": , \"key2\": \"value2\"}"
        d("json-repair-py", "py-108-parse_object-L96", Some(r#"{"key":["a",{"duplicated_key":"duplicated_value"}]}"#), COLON_IN_ARRAY),  // input: "{'key': ['a':{'duplicated_key': 'duplicated_value', 'duplicated_key': 'duplicated_value'}
        d("json-repair-py", "py-110-parse_object-L143", Some(r#"{"key":"value","key2":null}"#), NULL_NOT_EMPTY),  // input: "{\"key\": \"value\"}, \"key2\": }"
        d("json-repair-py", "py-115-parse_object-L148", Some(r#"{"key":"value"}"#), NO_COLON_REATTACH),  // input: "{\"key\": \"value\"}, \"key2\" \"value2\"}"
        d("json-repair-py", "py-130-parse_string-L72", Some(r#"[{"key":"value\", COMMENT \"notes\": \"lorem \"ipsum\", sic."}]"#), COMMENT_WORD),  // input: "[{\"key\": \"value\", COMMENT \"notes\": \"lorem \"ipsum\", sic.\" }]"
        d("json-repair-py", "py-131-parse_string-L76", Some(r#"{"key":"\"value"}"#), DOUBLE_OPEN),  // input: "{\"key\": \"\"value\"}"
        d("json-repair-py", "py-132-parse_string-L77", Some(r#"{"key":"value\", 5: \"value"}"#), NUMERIC_KEY),  // input: "{\"key\": \"value\", 5: \"value\"}"
        d("json-repair-py", "py-134-parse_string-L79", Some(r#"{"\" key":"val"}"#), DOUBLE_OPEN),  // input: "{\"\" key\":\"val\""
        d("json-repair-py", "py-142-parse_string-L174", Some(r#""\"""#), SINGLE_QUOTE_STR),  // input: "'\"'"
        d("json-repair-py", "py-159-parse_string-L274", Some(r#"{"key":"```json {\"key\": [{\"key1\": 1},{\"key2\": 2}]}```"}"#), NESTED_FENCE),  // input: "{\"key\": \"```json {\"key\": [{\"key1\": 1},{\"key2\": 2}]}```\"}"
        d("jsonrepair", "L34", None, PROSE),  // input: "trueble"
        d("jsonrepair", "L35", None, PROSE),  // input: "Trueble"
        d("jsonrepair", "L36", None, PROSE),  // input: "false_value"
        d("jsonrepair", "L37", None, PROSE),  // input: "false$"
        d("jsonrepair", "L38", None, PROSE),  // input: "nullifiable"
        d("jsonrepair", "L60", None, PROSE),  // input: "abc"
        d("jsonrepair", "L61", None, PROSE),  // input: "hello   world"
        d("jsonrepair", "L70", None, PROSE),  // input: "https://www.bible.com/"
        d("jsonrepair", "L79", Some(r#"["https://www.bible.com/,2"]"#), OPEN_STRING),  // input: "[\"https://www.bible.com/,2]"
        d("jsonrepair", "L87", Some(r#"["hello, world"]"#), OPEN_STRING),  // input: "[\"hello, world]"
        d("jsonrepair", "L94", Some(r#"["b,c,"]"#), OPEN_STRING),  // input: "[\"b,c,]"
        d("jsonrepair", "L97", Some(r#"["abc+/*comment*/\"def"]"#), CONCAT),  // input: "[\"abc+/*comment*/\"def\"]"
        d("jsonrepair", "L98", Some(r#"["abc/*comment*/+\"def"]"#), CONCAT),  // input: "[\"abc/*comment*/+\"def\"]"
        d("jsonrepair", "L99", Some(r#"["abc,/*comment*/\"def"]"#), CONCAT),  // input: "[\"abc,/*comment*/\"def\"]"
        d("jsonrepair", "L122", Some(r#"{"s ":null}"#), PARTIAL_KEY),  // input: "{\"s \\ud"
        d("jsonrepair", "L145", None, PROSE),  // input: "abc\""
        d("jsonrepair", "L152", Some(r#"["abc,\n\"def"]"#), OPEN_STRING),  // input: "[\n\"abc,\n\"def\"\n]"
        d("jsonrepair", "L153", Some(r#"["abc,  \n\"def"]"#), OPEN_STRING),  // input: "[\n\"abc,  \n\"def\"\n]"
        d("jsonrepair", "L176", Some(r#""\\a""#), ESCAPE),  // input: "\"\\a\""
        d("jsonrepair", "L237", None, JSONP),  // input: "callback_123(2);"
        d("jsonrepair", "L238", None, JSONP),  // input: "callback_123(\"foo\");"
        d("jsonrepair", "L239", None, JSONP),  // input: "callback_123(null);"
        d("jsonrepair", "L240", None, JSONP),  // input: "callback_123(true);"
        d("jsonrepair", "L241", None, JSONP),  // input: "callback_123(false);"
        d("jsonrepair", "L249", Some(r#"{}"#), REFUSE),  // input: "callback {}"
        d("jsonrepair", "L258", Some(r#"[{"a":"b"}]"#), FENCE_IN_BRACKETS),  // input: "[```\n{\"a\":\"b\"}\n```]"
        d("jsonrepair", "L259", Some(r#"[{"a":"b"}]"#), FENCE_IN_BRACKETS),  // input: "[```json\n{\"a\":\"b\"}\n```]"
        d("jsonrepair", "L320", None, JSONP),  // input: "NumberLong(\"2\")"
        d("jsonrepair", "L323", None, PROSE),  // input: "hello world"
        d("jsonrepair", "L324", None, PROSE),  // input: "She said: no way"
        d("jsonrepair", "L330", None, PROSE),  // input: "foo"
        d("jsonrepair", "L333", None, PROSE),  // input: "foo 2 bar"
        d("jsonrepair", "L341", None, PROSE),  // input: "ES2020"
        d("jsonrepair", "L342", None, PROSE),  // input: "0.0.1"
        d("jsonrepair", "L343", None, PROSE),  // input: "746de9ad-d4ff-4c66-97d7-00a92ad46967"
        d("jsonrepair", "L344", None, PROSE),  // input: "234..5"
        d("jsonrepair", "L347", None, PROSE),  // input: "2e3.4"
        d("jsonrepair", "L348", None, PROSE),  // input: "00."
        d("jsonrepair", "L349", None, PROSE),  // input: "-05"
        d("jsonrepair", "L350", None, PROSE),  // input: "e"
        d("jsonrepair", "L359", Some(r#"["a-z"]"#), REGEX),  // input: "/[a-z]_/"
        d("jsonrepair", "L360", None, REGEX),  // input: "/\\//"
        d("jsonrepair", "L361", None, REGEX),  // input: "/foo\"; console.log(-1); \"/"
        d("jsonrepair", "L367", Some(r#""hello +\n \" world""#), CONCAT),  // input: "\"hello +\n \" world\""
        d("jsonrepair", "L368", Some(r#""hello +""#), CONCAT),  // input: "\"hello +"
        d("jsonrepair", "L369", Some(r#"["hello +"]"#), CONCAT),  // input: "[\"hello +]"
        d("jsonrepair", "L401", None, NDJSON),  // input: "1\n2"
        d("jsonrepair", "L403", Some(r#"{}"#), EMPTY_VALUES),  // input: "/* 1 */\n{}\n\n/* 2 */\n{}\n\n/* 3 */\n{}\n"
        d("jsonrepair", "L404", Some(r#"{}"#), EMPTY_VALUES),  // input: "/* 1 */\n{},\n\n/* 2 */\n{},\n\n/* 3 */\n{}\n"
        d("jsonrepair", "L405", Some(r#"{}"#), EMPTY_VALUES),  // input: "/* 1 */\n{},\n\n/* 2 */\n{},\n\n/* 3 */\n{},\n"
        d("jsonrepair", "L406", None, NDJSON),  // input: "1,2,3"
        d("jsonrepair", "L407", None, NDJSON),  // input: "1,2,3,"
        d("jsonrepair", "L408", None, NDJSON),  // input: "1\n2\n3"
        d("jsonrepair", "L409", None, NDJSON),  // input: "a\nb"
        d("jsonrepair", "L410", None, NDJSON),  // input: "a,b"
        d("jsonrepair", "L411", None, PROSE),  // input: "0789"
        d("jsonrepair", "L412", None, PROSE),  // input: "000789"
        d("jsonrepair", "L413", None, PROSE),  // input: "001.2"
        d("jsonrepair", "L414", None, PROSE),  // input: "002e3"
        d("jsonrepair", "L418", Some(r#"{"a":null}"#), REFUSE),  // input: "{\"a\","
        d("jsonrepair", "L419", Some(r#"{}"#), REFUSE),  // input: "{:2}"
        d("jsonrepair", "L420", Some(r#"{"a":2}"#), REFUSE),  // input: "{\"a\":2}{}"
        d("jsonrepair", "L421", Some(r#"{"a":null}"#), REFUSE),  // input: "{\"a\" ]"
        d("jsonrepair", "L422", Some(r#"{"a":2}"#), REFUSE),  // input: "{\"a\":2}foo"
        d("jsonrepair", "L423", Some(r#"[]"#), REFUSE),  // input: "foo ["
        d("jsonrepair", "L424", Some(r#""\\u26""#), UESCAPE),  // input: "\"\\u26\""
        d("jsonrepair", "L425", Some(r#""\\uZ000""#), UESCAPE),  // input: "\"\\uZ000\""
        d("jsonrepair", "L426", Some(r#""\\uZ000""#), UESCAPE),  // input: "\"\\uZ000"
        d("jsonrepair", "L427", Some(r#""abc\u0000""#), CONTROL),  // input: "\"abc\u0000\""
        d("jsonrepair", "L428", Some(r#""abc\u001f""#), CONTROL),  // input: "\"abc\u001f\""
    ]
}

/* JSON Schema -> GBNF (src/json_schema.c): refusals name the keyword and its
 * JSON pointer, malformed schemas are LLMK_BAD_REQUEST, hostile schemas stay
 * bounded, the output is deterministic and parses as GBNF, and a few texts
 * are matched through the grammar engine's direct matcher. The grammar's
 * language against the jsonschema package is tests/py/test_json_schema.py. */
#include "check.h"
#include "llmk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int convert(const char *schema, char **out) { return llmk_json_schema_to_gbnf(schema, strlen(schema), out, NULL); }

/* rc is status and the message holds every needle. */
static void refused(const char *schema, int status, const char *n1, const char *n2) {
    char *g = (char *)1;
    int rc = convert(schema, &g);
    bool ok = rc == status && g == NULL && strstr(llmk_last_error(), n1) && (!n2 || strstr(llmk_last_error(), n2));
    if (!ok) fprintf(stderr, "schema %s: rc %d (%s), message: %s\n", schema, rc, llmk_status_name(rc), llmk_last_error());
    CHECK(ok);
}

/* Whether text is a whole string of the schema's grammar. */
static bool accepts(const char *schema, const char *text) {
    char *g = NULL;
    llmk_grammar *gr = NULL;
    bool whole = false, prefix = false;
    CHECK_EQ_INT(convert(schema, &g), LLMK_OK);
    CHECK_EQ_INT(llmk_grammar_parse(g, strlen(g), &gr), LLMK_OK);
    if (gr) CHECK_EQ_INT(llmk_grammar_match(gr, text, strlen(text), &whole, &prefix), LLMK_OK);
    llmk_grammar_free(gr);
    free(g);
    return whole;
}

static void test_refusals(void) {
    refused("{\"type\":\"integer\",\"minimum\":0}", LLMK_UNSUPPORTED, "\"minimum\"", "JSON Schema #:");
    refused("{\"properties\":{\"a/b\":{\"properties\":{\"c~\":{\"pattern\":\"x\"}}}}}", LLMK_UNSUPPORTED,
            "\"pattern\"", "#/properties/a~1b/properties/c~0:");
    refused("{\"items\":[{},{\"uniqueItems\":true}]}", LLMK_UNSUPPORTED, "\"uniqueItems\"", "#/items/1:");
    refused("{\"$defs\":{\"x\":{\"not\":{}}},\"anyOf\":[{\"$ref\":\"#/$defs/x\"}]}", LLMK_UNSUPPORTED, "\"not\"", "#/$defs/x:");
    refused("{\"oneOf\":[{\"type\":\"string\"},{\"maxLength\":3}]}", LLMK_UNSUPPORTED, "\"oneOf\"", "branches 0 and 1");
    refused("{\"type\":\"string\",\"format\":\"email\"}", LLMK_UNSUPPORTED, "\"format\"", "email");
    refused("{\"allOf\":[{},{\"type\":\"integer\"}]}", LLMK_UNSUPPORTED, "\"allOf\"", "#/allOf/1:");
    refused("{\"allOf\":[{\"properties\":{\"a\":{}}},{\"properties\":{\"a\":{\"type\":\"null\"}}}]}",
            LLMK_UNSUPPORTED, "property \"a\"", "#/allOf/1:");
    refused("{\"type\":\"object\",\"properties\":{\"a\":{\"$id\":\"x\"}}}", LLMK_UNSUPPORTED, "\"$id\"", "#/properties/a:");
    refused("{\"minItems\":1001}", LLMK_UNSUPPORTED, "\"minItems\"", NULL);
    refused("{\"type\":", LLMK_BAD_REQUEST, "invalid JSON", NULL);
    refused("{\"type\":\"text\"}", LLMK_BAD_REQUEST, "unknown type", NULL);
    refused("{\"$ref\":\"#/a/0\",\"a\":[{}]}", LLMK_UNSUPPORTED, "\"a\"", NULL);
    refused("{\"$ref\":\"#/nope\"}", LLMK_BAD_REQUEST, "names nothing", NULL);
    refused("{\"enum\":[1],\"const\":1}", LLMK_UNSUPPORTED, "\"const\"", NULL);
    refused("{\"type\":\"string\",\"enum\":[1,2]}", LLMK_BAD_REQUEST, "no value", NULL);
    refused("[]", LLMK_BAD_REQUEST, "object or a boolean", NULL);
    char *g = NULL;
    CHECK_EQ_INT(llmk_json_schema_to_gbnf(NULL, 0, &g, NULL), LLMK_INVALID_ARGUMENT);
    CHECK_EQ_INT(llmk_json_schema_to_gbnf("{}", 2, NULL, NULL), LLMK_INVALID_ARGUMENT);
}

/* Hostile schemas end in a refusal, not in unbounded work or memory. */
static void test_bounds(void) {
    size_t depth = 200, n = 0;
    char *deep = malloc(depth * 12 + 8);
    for (size_t i = 0; i < depth; i++) n += (size_t)sprintf(deep + n, "{\"items\":");
    n += (size_t)sprintf(deep + n, "{}");
    for (size_t i = 0; i < depth; i++) deep[n++] = '}';
    deep[n] = 0;
    refused(deep, LLMK_UNSUPPORTED, "nested deeper", NULL);
    free(deep);
    /* ~1.5 MB of enum strings: the grammar would pass its size bound */
    size_t count = 30000, cap = count * 56 + 32;
    char *big = malloc(cap);
    n = (size_t)sprintf(big, "{\"enum\":[");
    for (size_t i = 0; i < count; i++)
        n += (size_t)sprintf(big + n, "%s\"value-%06zu-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", i ? "," : "", i);
    sprintf(big + n, "]}");
    refused(big, LLMK_UNSUPPORTED, "exceed", NULL);
    free(big);
}

static void test_output(void) {
    const char *schema = "{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\"},\"a\":{\"enum\":[\"x\",null]},"
                         "\"c\":{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}},\"required\":[\"a\"],\"additionalProperties\":true}";
    char *g1 = NULL, *g2 = NULL;
    size_t l1 = 0;
    CHECK_EQ_INT(llmk_json_schema_to_gbnf(schema, strlen(schema), &g1, &l1), LLMK_OK);
    CHECK(!strcmp(llmk_last_error(), ""));
    CHECK_EQ_INT(convert(schema, &g2), LLMK_OK);
    CHECK(g1 && g2 && !strcmp(g1, g2) && strlen(g1) == l1);
    CHECK(g1 && !strncmp(g1, "root ::= ", 9));
    free(g1);
    free(g2);
    /* the schema's length is respected: a prefix that is itself a schema */
    CHECK_EQ_INT(llmk_json_schema_to_gbnf("{}garbage", 2, &g1, NULL), LLMK_OK);
    free(g1);

    CHECK(accepts(schema, "{\"a\":\"x\"}"));
    CHECK(accepts(schema, "{\"b\": -3, \"a\": null, \"c\": [{\"a\": \"x\"}], \"zz\": [1]}"));
    CHECK(!accepts(schema, "{\"b\": 1}"));                  /* a is required */
    CHECK(!accepts(schema, "{\"a\":\"x\",\"b\":1}"));      /* listed order */
    CHECK(!accepts(schema, "{\"a\":\"x\",\"c\":[{}]}"));   /* inner a required */
    CHECK(!accepts(schema, "{\"a\":\"x\",\"a\":\"x\"}"));  /* a listed name is no extra key */
    CHECK(accepts("{\"type\":\"string\",\"format\":\"date\"}", "\"2000-02-29\""));
    CHECK(!accepts("{\"type\":\"string\",\"format\":\"date\"}", "\"2100-02-29\""));
    CHECK(accepts(LLMK_JSON_SCHEMA_ANY_VALUE, "[1, {\"a\": [true, null, \"\\u00e9\"]}, -0.5e+3]"));
    CHECK(!accepts(LLMK_JSON_SCHEMA_ANY_OBJECT, "[]"));
    CHECK(!accepts(LLMK_JSON_SCHEMA_ANY_VALUE, "[1,]"));
}

int main(void) {
    test_refusals();
    test_bounds();
    test_output();
    return check_summary("test_json_schema");
}

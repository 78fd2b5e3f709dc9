// The featurizer against Vowpal Wabbit's own printed weight indices. Every expected index below
// was printed by VW (9.x) for an equivalent input in its repository's reference outputs
// (test/train-sets/ref and test/pred-sets/ref: `--invert_hash` files); the file each figure
// comes from is named beside it. The inputs here are written for this test, not copied.
#include "core/features/feature_space.h"

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/features/vw_hash.h"

namespace bandit::features {
namespace BANDIT_UNITY_ID {

using ::testing::HasSubstr;

FeatureSpace Space(int bits, std::vector<std::string> interactions = {}, bool constant = true) {
  FeatureSpaceOptions o;
  o.bits = bits;
  o.interactions = std::move(interactions);
  o.constant = constant;
  auto s = FeatureSpace::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

// Audit name -> weight index of one action (with the shared context merged in).
std::multimap<std::string, uint32_t> Indices(const FeatureSpace& space, const std::string& action,
                                             const std::string& shared = "") {
  ParsedFeatures a, s;
  InputLimits limits;
  EXPECT_TRUE(space.Parse(action, "action", limits, /*audit=*/true, &a).ok());
  if (!shared.empty()) {
    EXPECT_TRUE(space.Parse(shared, "context", limits, true, &s).ok());
  }
  SparseFeatures out;
  space.Featurize(a, shared.empty() ? nullptr : &s, /*audit=*/true, &out);
  EXPECT_EQ(out.names.size(), out.index.size());
  std::multimap<std::string, uint32_t> m;
  for (size_t i = 0; i < out.index.size(); ++i) m.emplace(out.names[i], out.index[i]);
  return m;
}

TEST(VwHash, HashStringFollowsVwDigitAndTrimRules) {
  // All digits: the number plus the seed; surrounding blanks trimmed first.
  EXPECT_EQ(HashString("123", 0), 123u);
  EXPECT_EQ(HashString(" 123\t", 7), 130u);
  EXPECT_EQ(HashString("", 5), 5u);  // VW's default namespace " " hashes to the seed
  EXPECT_EQ(HashString(" ", 0), 0u);
  // Otherwise MurmurHash3 x86_32 of the trimmed bytes (reference values of the algorithm).
  EXPECT_EQ(MurmurHash3("", 0), 0u);
  EXPECT_EQ(MurmurHash3("", 1), 0x514E28B7u);
  EXPECT_EQ(MurmurHash3("hello", 0), 0x248BFA47u);
  EXPECT_EQ(HashString(" hello ", 0), 0x248BFA47u);
  EXPECT_EQ(HashString("12a", 3), MurmurHash3("12a", 3));
}

// pred-sets/ref ... train-sets/ref/ignore_feature.interactions (--dsjson --cb_explore_adf,
// 18 bits): a shared namespace with string features, action namespaces, the constant.
TEST(FeatureSpace, StringFeaturesAndNamespacesMatchVw) {
  auto space = Space(18);
  auto m = Indices(space,
                   R"({"i":{"constant":1,"id":"Cold brew"},"j":{"origin":"ethiopia","roast":"dark"}})",
                   R"({"FromUrl":{"name":"Cathy","weather":"Sunny"}})");
  EXPECT_EQ(m.find("i^constant")->second, 26051u);
  EXPECT_EQ(m.find("i^idCold_brew")->second, 39661u);  // ' ' in a value becomes '_'
  EXPECT_EQ(m.find("j^originethiopia")->second, 6311u);
  EXPECT_EQ(m.find("j^roastdark")->second, 15410u);
  EXPECT_EQ(m.find("FromUrl^nameCathy")->second, 42529u);
  EXPECT_EQ(m.find("FromUrl^weatherSunny")->second, 159054u);
  EXPECT_EQ(m.find("Constant")->second, 116060u);
  EXPECT_EQ(m.size(), 7u);
}

// Personalizer's form (a list of objects, here inside a namespace as DSJSON has it) gives the
// same features as the object.
TEST(FeatureSpace, ListOfObjectsIsTheirUnion) {
  auto space = Space(18);
  auto object = Indices(space, R"({"j":{"type":"hot","origin":"kenya"}})",
                        R"({"FromUrl":{"name":"Cathy","weather":"Sunny"}})");
  auto list = Indices(space, R"({"j":[{"type":"hot"},{"origin":"kenya"}]})",
                      R"([{"FromUrl":{"name":"Cathy"}},{"FromUrl":{"weather":"Sunny"}}])");
  EXPECT_EQ(object, list);
  EXPECT_EQ(object.find("j^typehot")->second, 188731u);       // ignore_feature.interactions
  EXPECT_EQ(object.find("j^originkenya")->second, 231314u);
}

// train-sets/ref/ignore_feature_default_ns.interactions: top-level members are features of the
// default namespace, printed without a namespace.
TEST(FeatureSpace, DefaultNamespaceMatchesVw) {
  auto space = Space(18);
  auto m = Indices(space, R"({"i":{"id":"Cappucino"}})", R"({"name":"Bob"})");
  EXPECT_EQ(m.find("nameBob")->second, 42131u);
  EXPECT_EQ(m.find("i^idCappucino")->second, 153620u);
  EXPECT_EQ(Indices(space, R"({"name":"Alice"})").find("nameAlice")->second, 93812u);
}

// pred-sets/ref/igl_spinoff.inv (--dsjson --cb_explore_adf -q UA -b 17 --noconstant): numeric
// features and a quadratic interaction of a shared and an action namespace.
TEST(FeatureSpace, QuadraticInteractionMatchesVw) {
  auto space = Space(17, {"UA"}, /*constant=*/false);
  auto m = Indices(space, R"({"Action":{"action=music":1}})",
                   R"({"User":{"user=Anna":1,"time_of_day=afternoon":1}})");
  EXPECT_EQ(m.find("User^user=Anna")->second, 10769u);
  EXPECT_EQ(m.find("User^time_of_day=afternoon")->second, 65137u);
  EXPECT_EQ(m.find("Action^action=music")->second, 113474u);
  EXPECT_EQ(m.find("User^user=Anna*Action^action=music")->second, 99201u);
  EXPECT_EQ(m.find("User^time_of_day=afternoon*Action^action=music")->second, 77985u);
  EXPECT_EQ(m.size(), 5u);
  // -q AU is a different interaction (VW keeps the order the user wrote).
  auto reversed = Indices(Space(17, {"AU"}, false), R"({"Action":{"action=music":1}})",
                          R"({"User":{"user=Anna":1}})");
  EXPECT_NE(reversed.find("Action^action=music*User^user=Anna")->second, 99201u);
}

// train-sets/ref/dupeindex_self_quadratic.txt and dupeindex_self_cubic.txt (--interactions aa /
// aaa --noconstant, 18 bits): two namespaces sharing the letter 'a' form one group; a group
// with itself pairs each feature with itself and those after it.
TEST(FeatureSpace, SelfInteractionsOfASharedLetterMatchVw) {
  const std::string doc = R"({"ab":{"feat_1":1,"feat_2":1},"ac":{"feat_3":1,"feat_4":1}})";
  const std::map<std::string, uint32_t> quadratic = {
      {"ab^feat_2*ac^feat_3", 10184},  {"ac^feat_4*ac^feat_4", 18898},
      {"ab^feat_1*ab^feat_2", 106798}, {"ab^feat_1*ab^feat_1", 115074},
      {"ab^feat_2*ac^feat_4", 124206}, {"ac^feat_3*ac^feat_3", 139138},
      {"ab^feat_1*ac^feat_3", 161532}, {"ab^feat_1*ac^feat_4", 242714},
      {"ac^feat_3*ac^feat_4", 253284}, {"ab^feat_2*ab^feat_2", 258074}};
  auto q = Indices(Space(18, {"aa"}, false), doc);
  for (const auto& [name, index] : quadratic) {
    ASSERT_EQ(q.count(name), 1u) << name;
    EXPECT_EQ(q.find(name)->second, index) << name;
  }
  EXPECT_EQ(q.size(), 4u + quadratic.size());  // linear terms + the 10 pairs, nothing else
  const std::map<std::string, uint32_t> cubic = {
      {"ab^feat_1*ab^feat_1*ab^feat_2", 9267},   {"ac^feat_3*ac^feat_4*ac^feat_4", 10957},
      {"ab^feat_1*ab^feat_1*ab^feat_1", 17567},  {"ab^feat_1*ab^feat_2*ac^feat_3", 55085},
      {"ab^feat_1*ac^feat_3*ac^feat_4", 57365},  {"ab^feat_1*ab^feat_2*ac^feat_4", 71115},
      {"ab^feat_1*ac^feat_3*ac^feat_3", 74483},  {"ab^feat_1*ac^feat_4*ac^feat_4", 76367},
      {"ab^feat_2*ab^feat_2*ab^feat_2", 82811},  {"ac^feat_4*ac^feat_4*ac^feat_4", 105271},
      {"ab^feat_1*ab^feat_1*ac^feat_4", 143623}, {"ac^feat_3*ac^feat_3*ac^feat_4", 145159},
      {"ab^feat_2*ac^feat_4*ac^feat_4", 158155}, {"ab^feat_2*ab^feat_2*ac^feat_3", 169129},
      {"ab^feat_2*ac^feat_3*ac^feat_3", 193439}, {"ab^feat_1*ab^feat_2*ab^feat_2", 196863},
      {"ab^feat_2*ac^feat_3*ac^feat_4", 209273}, {"ab^feat_2*ab^feat_2*ac^feat_4", 218703},
      {"ab^feat_1*ab^feat_1*ac^feat_3", 259041}, {"ac^feat_3*ac^feat_3*ac^feat_3", 259553}};
  auto c = Indices(Space(18, {"aaa"}, false), doc);
  for (const auto& [name, index] : cubic) {
    ASSERT_EQ(c.count(name), 1u) << name;
    EXPECT_EQ(c.find(name)->second, index) << name;
  }
  EXPECT_EQ(c.size(), 4u + cubic.size());
}

// train-sets/ref/coin_model_overflow.invert.txt (-q ::, 18 bits, `| f:10000000000`): the
// wildcard pairs the default namespace with itself; values are VW's floats.
TEST(FeatureSpace, WildcardAndValuesMatchVw) {
  auto space = Space(18, {"::"});
  ParsedFeatures a;
  ASSERT_TRUE(space.Parse(R"({"f":10000000000})", "x", InputLimits(), true, &a).ok());
  SparseFeatures out;
  space.Featurize(a, nullptr, true, &out);
  ASSERT_EQ(out.index.size(), 3u);
  std::map<std::string, std::pair<uint32_t, double>> m;
  for (size_t i = 0; i < out.index.size(); ++i) m[out.names[i]] = {out.index[i], out.value[i]};
  EXPECT_EQ(m["f"].first, 34875u);
  EXPECT_EQ(m["Constant"].first, 116060u);
  EXPECT_EQ(m["f*f"].first, 195802u);
  EXPECT_EQ(m["f"].second, static_cast<double>(1e10f));
  EXPECT_EQ(m["f*f"].second, static_cast<double>(1e10f * 1e10f));
}

TEST(FeatureSpace, ArraysBooleansTextAndIgnoredKeys) {
  auto space = Space(18, {}, /*constant=*/false);
  ParsedFeatures p;
  ASSERT_TRUE(space
                  .Parse(R"({"v":[0.5,0,null,2],"flag":true,"off":false,"_tag":{"x":[1,{"y":2}]},
                              "n":null,"T":{"_text":"a b:c  d"}})",
                         "x", InputLimits(), true, &p)
                  .ok());
  SparseFeatures out;
  space.Featurize(p, nullptr, true, &out);
  std::map<std::string, std::pair<uint32_t, double>> m;
  for (size_t i = 0; i < out.index.size(); ++i) m[out.names[i]] = {out.index[i], out.value[i]};
  const uint32_t v = HashString("v", 0);
  // Array elements: index hash(key) + position; zeros dropped but counted, nulls not counted.
  EXPECT_EQ(m["v^[0]"], std::make_pair(static_cast<uint32_t>(v & space.mask()), 0.5));
  EXPECT_EQ(m["v^[2]"], std::make_pair(static_cast<uint32_t>((v + 2) & space.mask()), 2.0));
  EXPECT_EQ(m.count("v^[1]"), 0u);
  EXPECT_EQ(m["flag"].first, HashString("flag", 0) & space.mask());
  EXPECT_EQ(m.count("off"), 0u);
  const uint32_t t = HashString("T", 0);
  EXPECT_EQ(m["T^b_c"].first, HashString("b_c", t) & space.mask());
  EXPECT_EQ(m.count("T^a"), 1u);
  EXPECT_EQ(m.count("T^d"), 1u);
  EXPECT_EQ(out.index.size(), 6u);  // v[0], v[2], flag, T^a, T^b_c, T^d
}

TEST(FeatureSpace, HashSeedAndIgnoreChangeWhatVwWould) {
  FeatureSpaceOptions o;
  o.bits = 18;
  o.hash_seed = 42;
  o.ignore = "j";
  auto space = *FeatureSpace::Create(o);
  auto m = Indices(space, R"({"i":{"id":"x"},"j":{"a":1}})");
  EXPECT_EQ(m.find("i^idx")->second, HashString("idx", HashString("i", 42)) & space.mask());
  EXPECT_EQ(m.count("j^a"), 0u);
}

TEST(FeatureSpace, CompileInteractionsFollowsVwOrdering) {
  FeatureSpaceOptions o;
  o.interactions = {":::"};
  auto space = *FeatureSpace::Create(o);
  auto compiled = space.CompileInteractions("ab");
  // VW's combinations with repetition, then its sort: repeated letters grouped and sorted.
  EXPECT_EQ(compiled, (std::vector<std::string>{"aaa", "aab", "abb", "bbb"}));
  auto three = space.CompileInteractions("abc");
  EXPECT_THAT(three, ::testing::Contains("cba"));  // distinct letters keep VW's order
  EXPECT_EQ(three.size(), 10u);
  o.interactions = {"::", "ba", "ab"};
  auto quad = *FeatureSpace::Create(o);
  EXPECT_EQ(quad.CompileInteractions("ab"), (std::vector<std::string>{"aa", "ab", "bb"}));
}

TEST(FeatureSpace, BadInputNamesThePath) {
  auto space = Space(18);
  InputLimits limits;
  limits.max_features = 3;
  limits.max_depth = 3;
  limits.max_string_bytes = 8;
  auto err = [&](const std::string& json) {
    ParsedFeatures p;
    absl::Status s = space.Parse(json, "context", limits, false, &p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << json;
    return std::string(s.message());
  };
  EXPECT_THAT(err(R"({"a":1,"b":2,"c":3,"d":4})"), HasSubstr("context.d: expected at most 3 features"));
  EXPECT_THAT(err(R"({"a":{"b":{"c":{"d":1}}}})"), HasSubstr("context.a.b.c: expected nesting"));
  EXPECT_THAT(err(R"({"a":"123456789"})"), HasSubstr("context.a: expected a string of at most 8"));
  EXPECT_THAT(err(R"({"a":[1,"x"]})"), HasSubstr("context.a[1]: expected a number"));
  EXPECT_THAT(err(R"({"a":[[1]]})"), HasSubstr("does not nest arrays"));
  EXPECT_THAT(err(R"({"a":1e39})"), HasSubstr("context.a: expected a number within a float"));
  EXPECT_THAT(err(R"([{"a":1},5])"), HasSubstr("context[1]: expected an object"));
  EXPECT_THAT(err(R"([{"a":1},[2]])"), HasSubstr("context[1]: expected an object"));
  EXPECT_THAT(err(R"({"_tag":[[[[[[1]]]]]]})"), HasSubstr("expected nesting at most 3 deep"));
  EXPECT_THAT(err(R"("x")"), HasSubstr("expected an object"));
  EXPECT_THAT(err(R"({"a":)"), HasSubstr("context: malformed JSON"));
  EXPECT_THAT(err(""), HasSubstr("context: malformed JSON"));
}

// Every feature of a parse, in order, as comparable values.
std::vector<std::tuple<unsigned char, uint64_t, float>> FeaturesOf(const ParsedFeatures& p) {
  std::vector<std::tuple<unsigned char, uint64_t, float>> out;
  for (const FeatureGroup& g : p.groups)
    for (const ParsedFeature& f : g.features) out.emplace_back(g.letter, f.index, f.value);
  return out;
}

// A remembered document is what Parse makes of its text in that space under those limits,
// whichever spaces and documents came between, and a refusal is Parse's (never remembered).
TEST(ParsedDocuments, YieldWhatParseMakesInEachSpace) {
  FeatureSpaceOptions seeded;
  seeded.bits = 18;
  seeded.hash_seed = 7;
  seeded.ignore = "j";
  std::vector<FeatureSpace> spaces = {Space(18), Space(10), *FeatureSpace::Create(seeded)};
  for (int k = 0; k < 6; ++k) spaces.push_back(Space(12 + k));  // beyond kMaxSpaces
  const std::vector<std::string> documents = {
      R"({"Action":{"genre":"g1","price":3}})", R"({"i":{"id":"x"},"j":{"a":1}})",
      R"([{"a":{"x":1}},{"b":{"y":"z"}}])", R"({"Action":{"genre":"g1","price":3}})",
      R"({"t":[1,2,3],"_text":"a b"})"};
  InputLimits limits;
  ParsedDocuments remembered;
  for (int pass = 0; pass < 3; ++pass) {
    for (const FeatureSpace& space : spaces) {
      for (const std::string& json : documents) {
        ParsedFeatures direct;
        ASSERT_TRUE(space.Parse(json, "d", limits, false, &direct).ok());
        auto got = remembered.Parse(space, json, "d", limits);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(FeaturesOf(**got), FeaturesOf(direct)) << json << " pass " << pass;
      }
    }
  }
  // A document a tighter limit refuses is refused, with Parse's message, though it was
  // remembered under the default limits.
  InputLimits tight;
  tight.max_features = 1;
  ParsedFeatures direct;
  const absl::Status want = spaces[0].Parse(documents[0], "actions[3].features", tight, false,
                                            &direct);
  ASSERT_FALSE(want.ok());
  auto got = remembered.Parse(spaces[0], documents[0], "actions[3].features", tight);
  EXPECT_EQ(got.status(), want);
  EXPECT_EQ(remembered.Parse(spaces[0], R"({"a":)", "x", limits).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Long documents and many of them: still Parse's.
  std::string longer = R"({"Action":{)";
  for (int i = 0; i < 600; ++i) absl::StrAppend(&longer, i ? "," : "", "\"k", i, "\":", i + 1);
  longer += "}}";
  ASSERT_GT(longer.size(), ParsedDocuments::kMaxDocumentBytes);
  for (int i = 0; i < 3000; ++i) {
    const std::string json = i % 100 == 0 ? longer : absl::StrCat(R"({"U":{"id":")", i, R"("}})");
    ParsedFeatures want_parsed;
    ASSERT_TRUE(spaces[1].Parse(json, "d", limits, false, &want_parsed).ok());
    auto doc = remembered.Parse(spaces[1], json, "d", limits);
    ASSERT_TRUE(doc.ok()) << doc.status();
    EXPECT_EQ(FeaturesOf(**doc), FeaturesOf(want_parsed)) << i;
  }
}

// CheckTerms counts exactly what Featurize makes, and refuses past the limit (a cubic
// interaction of n features makes about n^3 / 6 terms); FeaturizeChecked refuses as it does
// and otherwise makes what Featurize makes.
TEST(FeatureSpace, CheckTermsCountsWhatFeaturizeMakes) {
  const std::string doc = R"({"ab":{"f1":1,"f2":1,"f3":1},"ac":{"g1":1,"g2":1},"b":{"h":1}})";
  for (const auto& interactions : std::vector<std::vector<std::string>>{
           {}, {"aa"}, {"ab"}, {"aaa"}, {"aab"}, {"abb"}, {"::"}, {":::"}, {"aba"}}) {
    FeatureSpace space = Space(18, interactions);
    ParsedFeatures p;
    ASSERT_TRUE(space.Parse(doc, "x", InputLimits(), false, &p).ok());
    SparseFeatures out;
    space.Featurize(p, nullptr, false, &out);
    const int64_t n = static_cast<int64_t>(out.index.size());
    EXPECT_TRUE(space.CheckTerms(p, nullptr, n, "x").ok()) << interactions.size();
    const absl::Status over = space.CheckTerms(p, nullptr, n - 1, "actions[3]");
    EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(over.message()),
                HasSubstr(absl::StrCat("actions[3]: expected at most ", n - 1,
                                       " terms per action (features plus their interactions), got ",
                                       n)));
    // FeaturizeChecked: CheckTerms' verdict and Featurize's vector in one pass.
    std::vector<uint32_t> index = {7};
    std::vector<double> value = {7};
    const absl::Status refused = space.FeaturizeChecked(p, nullptr, n - 1, "actions[3]", &index,
                                                        &value);
    EXPECT_EQ(refused, over);
    EXPECT_EQ(index, std::vector<uint32_t>{7});  // nothing written
    ASSERT_TRUE(space.FeaturizeChecked(p, nullptr, n, "x", &index, &value).ok());
    EXPECT_EQ(index, out.index);
    EXPECT_EQ(value, out.value);
  }
  // A cubic interaction far past any limit is refused with its count, not built.
  FeatureSpace cubic = Space(18, {"aaa"});
  std::string many = R"({"a":{)";
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&many, i ? "," : "", "\"f", i, "\":1");
  many += "}}";
  ParsedFeatures p;
  ASSERT_TRUE(cubic.Parse(many, "x", InputLimits(), false, &p).ok());
  std::vector<uint32_t> index;
  std::vector<double> value;
  const absl::Status refused = cubic.FeaturizeChecked(p, nullptr, 100'000, "actions[0]", &index,
                                                      &value);
  EXPECT_EQ(refused, cubic.CheckTerms(p, nullptr, 100'000, "actions[0]"));
  // The constant, 2000 features, and n(n+1)(n+2)/6 triples of them.
  const int64_t want = 1 + 2000 + int64_t{2000} * 2001 * 2002 / 6;
  EXPECT_THAT(std::string(refused.message()), HasSubstr(absl::StrCat("got ", want)));
  EXPECT_TRUE(index.empty());
}

// The terms of every interaction against VW's fold written out term by term (InteractionIndex,
// masked; the values' float product), over namespace sizes 1 to 9 (every remainder of the
// featurizer's four-at-a-time loop, self-interactions starting at every offset) and both hash
// widths, with and without audit names (the documents parsed with their names).
TEST(FeatureSpace, InteractionTermsEqualVwsFoldTermByTerm) {
  auto doc = [](char ns, int n, int salt) {
    std::string s = absl::StrCat("{\"", std::string(1, ns), "\":{");
    for (int i = 0; i < n; ++i)
      absl::StrAppend(&s, i ? "," : "", "\"", std::string(1, ns), i, "\":",
                      i % 3 == 0 ? absl::StrCat("\"v", salt, "_", i, "\"")
                                 : absl::StrCat(0.1 * (i + salt) + 1e-7 * i));
    return s + "}}";
  };
  for (int bits : {18, 30})
    for (const auto& inter : std::vector<std::string>{"ab", "aa", "ba", "aab", "abb", "bbb"})
      for (int na = 1; na <= 9; ++na)
        for (int nb : {1, 4, 7, 9}) {
          FeatureSpace space = Space(bits, {inter});
          ParsedFeatures a, b;
          ASSERT_TRUE(space.Parse(doc('a', na, nb), "a", InputLimits(), true, &a).ok());
          ASSERT_TRUE(space.Parse(doc('b', nb, na), "b", InputLimits(), true, &b).ok());
          const uint64_t mask = (uint64_t{1} << bits) - 1;
          std::vector<uint32_t> index;
          std::vector<double> value;
          const std::vector<ParsedFeature>& fa = a.Find('a')->features;
          const std::vector<ParsedFeature>& fb = b.Find('b')->features;
          auto of = [&](char c) -> const std::vector<ParsedFeature>& { return c == 'a' ? fa : fb; };
          // VW's namespace order: the action's ('a'), the constant added when the action was
          // parsed, then the shared ones ('b') the merger appends.
          for (const auto* g : {&fa, &fb}) {
            for (const ParsedFeature& f : *g) {
              index.push_back(static_cast<uint32_t>(f.index & mask));
              value.push_back(f.value);
            }
            if (g == &fa) {
              index.push_back(static_cast<uint32_t>(kConstantFeature & mask));
              value.push_back(1.0);
            }
          }
          const auto& g0 = of(inter[0]);
          const auto& g1 = of(inter[1]);
          for (size_t i = 0; i < g0.size(); ++i)
            for (size_t j = inter[0] == inter[1] ? i : 0; j < g1.size(); ++j) {
              if (inter.size() == 2) {
                index.push_back(
                    static_cast<uint32_t>(InteractionIndex(g0[i].index, g1[j].index) & mask));
                value.push_back(static_cast<double>(g0[i].value * g1[j].value));
                continue;
              }
              const auto& g2 = of(inter[2]);
              for (size_t q = inter[1] == inter[2] ? j : 0; q < g2.size(); ++q) {
                index.push_back(static_cast<uint32_t>(
                    InteractionIndex(InteractionIndex(g0[i].index, g1[j].index), g2[q].index) &
                    mask));
                value.push_back(static_cast<double>(g0[i].value * g1[j].value * g2[q].value));
              }
            }
          for (bool audit : {false, true}) {
            SparseFeatures out;
            space.Featurize(a, &b, audit, &out);
            const std::string what = absl::StrCat(bits, " ", inter, " ", na, " ", nb, " ", audit);
            ASSERT_EQ(out.index, index) << what;
            ASSERT_EQ(out.value, value) << what;
            EXPECT_EQ(out.names.size(), audit ? index.size() : 0) << what;
          }
        }
}

TEST(FeatureSpace, OptionsAreValidated) {
  FeatureSpaceOptions o;
  o.bits = 31;
  EXPECT_EQ(FeatureSpace::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.bits = 18;
  o.interactions = {"abcd"};
  EXPECT_THAT(FeatureSpace::Create(o).status().message(), HasSubstr("interactions[0]"));
  o.interactions = {"a"};
  EXPECT_FALSE(FeatureSpace::Create(o).ok());
}

namespace ccb {

// One action's terms in a slot, as VW's ccb_explore_adf featurizes it: the shared context with
// the slot's features and index added (FeatureSpace::AddSlotFeatures), in the slot space.
std::multiset<std::pair<std::string, uint32_t>> SlotTerms(const FeatureSpace& slots,
                                                          const std::string& shared,
                                                          const std::string& action,
                                                          const std::string& slot, int index) {
  InputLimits limits;
  ParsedFeatures s, a, f;
  EXPECT_TRUE(slots.ParseText(shared, "shared", limits, true, &s).ok());
  EXPECT_TRUE(slots.ParseText(action, "action", limits, true, &a).ok());
  EXPECT_TRUE(slots.ParseText(slot, "slot", limits, true, &f).ok());
  slots.AddSlotFeatures(f, index, /*audit=*/true, &s);
  SparseFeatures out;
  slots.Featurize(a, &s, /*audit=*/true, &out);
  std::multiset<std::pair<std::string, uint32_t>> terms;
  for (size_t i = 0; i < out.index.size(); ++i) terms.emplace(out.names[i], out.index[i]);
  return terms;
}

// A line of VW's --audit output: tab-separated name:index:value:weight@offset terms.
std::multiset<std::pair<std::string, uint32_t>> Printed(const std::string& line) {
  std::multiset<std::pair<std::string, uint32_t>> terms;
  std::stringstream ss(line);
  std::string term;
  while (std::getline(ss, term, '\t')) {
    if (term.empty()) continue;
    const size_t colon = term.find(':');
    const size_t next = term.find(':', colon + 1);
    terms.emplace(term.substr(0, colon),
                  static_cast<uint32_t>(std::stoul(term.substr(colon + 1, next - colon - 1))));
  }
  return terms;
}

}  // namespace ccb

// test/train-sets/ccb_audit_multi.dat with `--ccb_explore_adf --noconstant -q :: --audit`
// (train-sets/ref/ccb_audit_multi.stdout): slot namespaces merge into the shared context, the
// slot index is a feature of its own, and every term is also interacted with it.
TEST(FeatureSpace, SlotFeaturesAndIndexMatchVwsConditionalContextualBandits) {
  auto slots = Space(18, {"::"}, /*constant=*/false).ForSlots();
  ASSERT_TRUE(slots.ok()) << slots.status();
  const std::string shared = "ccb shared | a";
  EXPECT_EQ(
      ccb::SlotTerms(*slots, shared, "ccb action | b", "ccb slot |s a", 0),
      ccb::Printed("b:163331:1:0@0\ta:92594:1:0@0\ts^a:220006:1:0@0\t_ccb_slot_index^index0:68306:1:"
                   "0@0\tb*b:139450:1:0@0\tb*a:79627:1:0@0\ta*a:2692:1:0@0\tb*s^a:198111:1:0@0\ta*"
                   "s^a:145488:1:0@0\tb*_ccb_slot_index^index0:87147:1:0@0\ta*_ccb_slot_index^"
                   "index0:27108:1:0@0\ts^a*s^a:244468:1:0@0\ts^a*_ccb_slot_index^index0:125760:1:"
                   "0@0\tb*b*_ccb_slot_index^index0:36380:1:0@0\tb*a*_ccb_slot_index^index0:44163:"
                   "1:0@0\ta*a*_ccb_slot_index^index0:100126:1:0@0\tb*s^a*_ccb_slot_index^index0:"
                   "210143:1:0@0\ta*s^a*_ccb_slot_index^index0:241442:1:0@0\ts^a*s^a*_ccb_slot_"
                   "index^index0:148686:1:0@0"));
  EXPECT_EQ(ccb::SlotTerms(*slots, shared, "ccb action |", "ccb slot |v b", 1),
            ccb::Printed("a:92594:1:0@0\tv^b:119331:1:0@0\t_ccb_slot_index^index1:25433:1:0@0\ta*a:"
                         "2692:1:0@0\ta*v^b:45333:1:0@0\ta*_ccb_slot_index^index1:65647:1:0@0\tv^b*"
                         "v^b:7994:1:0@0\tv^b*_ccb_slot_index^index1:110144:1:0@0\ta*a*_ccb_slot_"
                         "index^index1:61077:1:0@0\ta*v^b*_ccb_slot_index^index1:173910:1:0@0\tv^"
                         "b*v^b*_ccb_slot_index^index1:84759:1:0@0"));
}

// test/train-sets/ccb_audit_multi_default_ns.dat with `--ccb_explore_adf -q :: --audit`
// (train-sets/ref/ccb_audit_multi_default_ns.stdout): a slot's default-namespace features go to
// the slot namespace (they keep their names and hashes but interact as a namespace of their own).
TEST(FeatureSpace, SlotDefaultNamespaceMatchesVw) {
  auto slots = Space(18, {"::"}).ForSlots();
  ASSERT_TRUE(slots.ok()) << slots.status();
  const std::string shared = "ccb shared | a";
  EXPECT_EQ(ccb::SlotTerms(*slots, shared, "ccb action |", "ccb slot | a", 0),
            ccb::Printed("Constant:116060:1:0@0\ta:92594:1:0@0\ta:92594:1:0@0\t_ccb_slot_index^"
                         "index0:68306:1:0@0\ta*a:2692:1:0@0\ta*a:2692:1:0@0\ta*_ccb_slot_index^"
                         "index0:27108:1:0@0\ta*a:2692:1:0@0\ta*_ccb_slot_index^index0:27108:1:0@"
                         "0\ta*a*_ccb_slot_index^index0:100126:1:0@0\ta*a*_ccb_slot_index^index0:"
                         "100126:1:0@0\ta*a*_ccb_slot_index^index0:100126:1:0@0"));
  EXPECT_EQ(ccb::SlotTerms(*slots, shared, "ccb action |", "ccb slot | b", 1),
            ccb::Printed("Constant:116060:1:0@0\ta:92594:1:0@0\tb:163331:1:0@0\t_ccb_slot_index^"
                         "index1:25433:1:0@0\ta*a:2692:1:0@0\ta*b:204085:1:0@0\ta*_ccb_slot_index^"
                         "index1:65647:1:0@0\tb*b:139450:1:0@0\tb*_ccb_slot_index^index1:15840:1:0@"
                         "0\ta*a*_ccb_slot_index^index1:61077:1:0@0\ta*b*_ccb_slot_index^index1:"
                         "170294:1:0@0\tb*b*_ccb_slot_index^index1:124823:1:0@0"));
  // A triple would make four-way terms with the slot index: refused, naming it.
  EXPECT_THAT(std::string(Space(18, {"abc"}).ForSlots().status().message()), HasSubstr("'abc'"));
}

// A namespace whose JSON key is empty is named as VW's audit names it: no prefix. VW 9.11.2's
// `--cb_explore_adf --json --audit` on {"U":{"x":1},"":{"k":1},"_multi":[{"":{"a":1}},...]}
// printed, for the first action: a:92594 k:107985 Constant:116060 U^x:73290.
TEST(FeatureSpace, AnEmptyNamespaceKeyIsNamedAsVwAuditsIt) {
  const auto m = Indices(Space(18), R"({"":{"a":1}})", R"({"U":{"x":1},"":{"k":1}})");
  const std::multimap<std::string, uint32_t> vw = {
      {"a", 92594}, {"k", 107985}, {"Constant", 116060}, {"U^x", 73290}};
  EXPECT_EQ(m, vw);
}


// An exponent too long for VW's int accumulator wraps modulo 2^32 there. VW 9.11.2 printed, for
// `| a:1e4294967297 b:2e-4294967297 c:3e4294967296` with --audit, the values 10, 0.2 and 3.
TEST(FeatureSpace, AnExponentPastIntRangeWrapsAsVwReadsIt) {
  EXPECT_EQ(ParseVwFloat("1e4294967297"), 10.0f);
  EXPECT_EQ(ParseVwFloat("2e-4294967297"), 2.0f / 10.0f);
  EXPECT_EQ(ParseVwFloat("3e4294967296"), 3.0f);
  EXPECT_EQ(ParseVwFloat("1e99999999999999999999"), ParseVwFloat("1e1661992959"));
}

}  // namespace
}  // namespace bandit::features

//===- http_api.cpp - tc-service's routes: JSON in, JSON out ---------------===//
//
// Each handler reads its body through Fields, which checks presence, type
// and range of every field and refuses unknown ones, so that the model
// only ever sees a request that makes sense; what is wrong is thrown as a
// Failure and becomes {"error": ...} with its 4xx status.
//
//===----------------------------------------------------------------------===//
#include "examples/service/http_api.h"

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "examples/service/model.h"

namespace tc_service {
namespace {

using json = nlohmann::json;

/// The routes and their methods: an unknown route is a 404, a known one
/// asked with another method a 405 naming the right one.
const std::map<std::string, std::string> &routeMethods() {
  static const std::map<std::string, std::string> routes = {
      {"/health", "GET"},      {"/train/start", "POST"}, {"/train/stop", "POST"},
      {"/train/status", "GET"}, {"/train/losses", "GET"}, {"/eval", "POST"},
      {"/infer", "POST"}};
  return routes;
}

const char *typeName(const json &v) {
  switch (v.type()) {
  case json::value_t::null: return "null";
  case json::value_t::boolean: return "a boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned: return "an integer";
  case json::value_t::number_float: return "a number with a fraction";
  case json::value_t::string: return "a string";
  case json::value_t::array: return "an array";
  case json::value_t::object: return "an object";
  default: return "something else";
  }
}

void reply(httplib::Response &res, int status, const json &body) {
  res.status = status;
  // Messages quote the request (its path, a field's name), whose bytes need
  // not be UTF-8: replaced, not thrown.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void replyError(httplib::Response &res, int status, const std::string &message) {
  reply(res, status, json{{"error", message}});
}

/// A request body's object, read field by field; done() refuses the fields
/// nobody asked for (a misspelt "step" must not silently become the default).
class Fields {
public:
  Fields(const httplib::Request &req, bool emptyIsObject) : route_(req.path) {
    if (req.body.empty() && emptyIsObject) {
      obj_ = json::object();
      return;
    }
    if (req.body.empty())
      fail("the body is empty; " + route_ + " wants a JSON object");
    try {
      obj_ = json::parse(req.body);
    } catch (const json::exception &e) { // parse_error, out_of_range (1e400)
      fail(std::string("the body is not valid JSON (") + e.what() + ")");
    }
    if (!obj_.is_object())
      fail(std::string("the body must be a JSON object, not ") + typeName(obj_));
  }

  bool has(const std::string &name) const { return obj_.contains(name); }

  int64_t integer(const std::string &name, int64_t min, int64_t max, const int64_t *fallback) {
    const json *v = take(name, fallback != nullptr);
    if (!v)
      return *fallback;
    return integerValue(*v, "\"" + name + "\"", min, max);
  }

  double number(const std::string &name, double min, double max, double fallback) {
    const json *v = take(name, true);
    if (!v)
      return fallback;
    if (!v->is_number())
      fail("\"" + name + "\" must be a number, not " + typeName(*v));
    double x = v->get<double>();
    if (!std::isfinite(x) || x < min || x > max)
      fail("\"" + name + "\" = " + v->dump() + " is outside [" + json(min).dump() + ", " +
           json(max).dump() + "]");
    return x;
  }

  std::string string(const std::string &name, const std::set<std::string> &allowed,
                     const std::string &fallback) {
    const json *v = take(name, true);
    if (!v)
      return fallback;
    if (!v->is_string())
      fail("\"" + name + "\" must be a string, not " + typeName(*v));
    std::string s = v->get<std::string>();
    if (!allowed.empty() && !allowed.count(s)) {
      std::string list;
      for (const std::string &a : allowed)
        list += (list.empty() ? "\"" : ", \"") + a + "\"";
      fail("\"" + name + "\" = \"" + s + "\" is not one of " + list);
    }
    return s;
  }

  /// A required non-empty array of token ids in [0, vocab), at most `maxLen`.
  std::vector<int64_t> tokens(const std::string &name, int64_t vocab, size_t minLen,
                              size_t maxLen) {
    const json *v = take(name, false);
    if (!v->is_array())
      fail("\"" + name + "\" must be an array of token ids, not " + typeName(*v));
    if (v->size() < minLen || v->size() > maxLen)
      fail("\"" + name + "\" has " + std::to_string(v->size()) + " token ids; " + route_ +
           " takes " + std::to_string(minLen) + " to " + std::to_string(maxLen));
    std::vector<int64_t> ids;
    ids.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i)
      ids.push_back(integerValue((*v)[i], "\"" + name + "\"[" + std::to_string(i) + "]", 0,
                                 vocab - 1, " (the vocabulary is [0, " +
                                                std::to_string(vocab) + "))"));
    return ids;
  }

  void done() {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!read_.count(it.key()))
        fail("unknown field \"" + it.key() + "\" for " + route_ + " (it takes " + known() + ")");
  }

  /// Names what the route takes, for the unknown-field message.
  void expect(std::initializer_list<const char *> names) {
    for (const char *n : names)
      known_.push_back(n);
  }

  [[noreturn]] static void fail(const std::string &message) { throw Failure{400, message}; }

private:
  const json *take(const std::string &name, bool optional) {
    read_.insert(name);
    auto it = obj_.find(name);
    if (it == obj_.end()) {
      if (optional)
        return nullptr;
      fail("missing field \"" + name + "\"");
    }
    return &*it;
  }

  static int64_t integerValue(const json &v, const std::string &what, int64_t min, int64_t max,
                              const std::string &rangeNote = "") {
    if (!v.is_number_integer())
      fail(what + " must be an integer, not " + typeName(v));
    // JSON integers beyond int64 arrive unsigned: compare those as such.
    bool inRange = v.is_number_unsigned()
                       ? max >= 0 && v.get<uint64_t>() <= static_cast<uint64_t>(max) &&
                             (min <= 0 || v.get<uint64_t>() >= static_cast<uint64_t>(min))
                       : v.get<int64_t>() >= min && v.get<int64_t>() <= max;
    if (!inRange)
      fail(what + " = " + v.dump() + " is outside [" + std::to_string(min) + ", " +
           std::to_string(max) + "]" + rangeNote);
    return v.get<int64_t>();
  }

  std::string known() const {
    std::string s;
    for (const std::string &k : known_)
      s += (s.empty() ? "\"" : ", \"") + k + "\"";
    return s.empty() ? "no fields" : s;
  }

  std::string route_;
  json obj_;
  std::set<std::string> read_;
  std::vector<std::string> known_;
};

json statusJson(const JobStatus &s) {
  json j = {{"state", s.state},
            {"step", s.step},
            {"steps", s.steps},
            {"progress", s.steps ? static_cast<double>(s.step) / static_cast<double>(s.steps) : 0.0},
            {"loss", std::isfinite(s.loss) ? json(s.loss) : json(nullptr)},
            {"tokens_per_s", s.tokensPerS},
            {"elapsed_s", s.elapsedS},
            {"data", s.data}};
  if (!s.error.empty())
    j["error"] = s.error;
  return j;
}

/// Runs a handler; a Failure becomes its status and {"error"}, anything else
/// thrown a 500 (a bug: the model reports its failures as Failures).
httplib::Server::Handler guarded(std::function<json(const httplib::Request &, int *)> fn) {
  return [fn](const httplib::Request &req, httplib::Response &res) {
    try {
      int status = 200;
      json body = fn(req, &status);
      reply(res, status, body);
    } catch (const Failure &f) {
      replyError(res, f.http, f.message);
    } catch (const std::exception &e) {
      replyError(res, 500, std::string("internal error: ") + e.what());
    }
  };
}

/// Refuses, before any body is read, the bodies whose size
/// set_payload_max_length cannot bound: cpp-httplib 0.11 checks it against
/// Content-Length only, reading chunked bodies, bodies without a length and
/// decompressed ones whole. The reply closes the connection, whose unread
/// body would otherwise be taken for the next request.
httplib::Server::HandlerResponse refuseUnboundedBodies(const httplib::Request &req,
                                                       httplib::Response &res) {
  std::string why;
  int status = 0;
  // The methods whose body cpp-httplib reads to the end of the connection
  // when no length is given.
  bool readsBody = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                   req.method == "PRI";
  if (req.has_header("Transfer-Encoding"))
    status = 411, why = "chunked request bodies are not taken: send a Content-Length";
  else if (readsBody && !req.has_header("Content-Length"))
    status = 411, why = "a " + req.method + " needs a Content-Length (0 for no body)";
  else if (req.has_header("Content-Encoding") && req.get_header_value("Content-Encoding") != "identity")
    status = 415, why = "compressed request bodies (Content-Encoding: " +
                        req.get_header_value("Content-Encoding") + ") are not taken: send JSON";
  else if (req.is_multipart_form_data())
    status = 415, why = "multipart bodies are not taken: send JSON";
  if (!status)
    return httplib::Server::HandlerResponse::Unhandled;
  res.set_header("Connection", "close");
  replyError(res, status, why);
  return httplib::Server::HandlerResponse::Handled;
}

} // namespace

void installRoutes(httplib::Server &server, Model &model, const ApiLimits &limits) {
  server.set_payload_max_length(limits.maxBodyBytes);
  server.set_pre_routing_handler(refuseUnboundedBodies);

  server.Get("/health", guarded([&model](const httplib::Request &, int *) {
    return json{{"status", "ok"},
                {"artifact", model.artifact()},
                {"device", model.device()},
                {"batch", model.batch()},
                {"context", model.context()},
                {"vocab", model.vocab()},
                {"job", model.status().state}};
  }));

  server.Post("/train/start", guarded([&model, limits](const httplib::Request &req, int *status) {
    Fields f(req, false);
    f.expect({"steps", "lr", "warmup", "schedule", "data", "data_dtype", "seed"});
    JobConfig c;
    c.steps = f.integer("steps", 1, limits.maxSteps, nullptr);
    c.lr = f.number("lr", 0, 10, -1);
    if (f.has("lr") && !(c.lr > 0))
      Fields::fail("\"lr\" must be > 0 (leave it out for the artifact's)");
    const int64_t zero = 0;
    c.warmup = f.integer("warmup", 0, c.steps, &zero);
    c.schedule = f.string("schedule", {"constant", "cosine"}, "constant");
    c.data = f.string("data", {}, "synthetic");
    if (c.data.empty())
      Fields::fail("\"data\" must be a token file or \"synthetic\", not empty");
    if (c.data == "synthetic")
      c.data.clear();
    c.dataDtype = f.string("data_dtype", {"uint16", "uint32"}, "uint16");
    const int64_t seed = 1337;
    c.seed = static_cast<uint64_t>(f.integer("seed", 0, std::numeric_limits<int64_t>::max(), &seed));
    f.done();
    Failure failure;
    if (!model.startJob(c, &failure))
      throw failure;
    *status = 202;
    return statusJson(model.status());
  }));

  server.Post("/train/stop", guarded([&model](const httplib::Request &req, int *) {
    Fields f(req, true);
    f.done();
    JobStatus after;
    Failure failure;
    if (!model.stopJob(&after, &failure))
      throw failure;
    return statusJson(after);
  }));

  server.Get("/train/status", guarded([&model](const httplib::Request &, int *) {
    return statusJson(model.status());
  }));

  server.Get("/train/losses", guarded([&model](const httplib::Request &, int *) {
    return json{{"losses", model.losses()}};
  }));

  server.Post("/eval", guarded([&model](const httplib::Request &req, int *) {
    Fields f(req, false);
    f.expect({"tokens"});
    std::vector<int64_t> tokens =
        f.tokens("tokens", model.vocab(), static_cast<size_t>(model.context() + 1), 1 << 20);
    f.done();
    double loss = 0;
    int64_t evaluated = 0;
    Failure failure;
    if (!model.eval(tokens, &loss, &evaluated, &failure))
      throw failure;
    return json{{"loss", loss}, {"tokens", evaluated}};
  }));

  server.Post("/infer", guarded([&model, limits](const httplib::Request &req, int *) {
    Fields f(req, false);
    f.expect({"tokens", "generate"});
    std::vector<int64_t> tokens = f.tokens("tokens", model.vocab(), 1, 1 << 20);
    const int64_t zero = 0;
    int64_t n = f.integer("generate", 0, limits.maxNewTokens, &zero);
    f.done();
    std::vector<float> logits;
    std::vector<int64_t> generated;
    Failure failure;
    if (!model.infer(tokens, n, &logits, &generated, &failure))
      throw failure;
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[best])
        best = i;
    return json{{"logits", logits},
                {"next_token", best},
                {"generated", generated}};
  }));

  // What no handler answered (unknown route or method, httplib's own 400s
  // and 413s) gets a JSON message too; replies a handler wrote stay as they
  // are.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [limits](const httplib::Request &req, httplib::Response &res) {
    if (!res.body.empty())
      return httplib::Server::HandlerResponse::Unhandled;
    auto route = routeMethods().find(req.path);
    if (res.status == 404 && route != routeMethods().end()) {
      res.status = 405;
      res.set_header("Allow", route->second);
      replyError(res, 405, req.method + " is not allowed on " + req.path + "; use " +
                               route->second);
    } else if (res.status == 404) {
      std::string list;
      for (const auto &r : routeMethods())
        list += (list.empty() ? "" : ", ") + r.second + " " + r.first;
      replyError(res, 404, "no route " + req.method + " " + req.path + " (the routes: " + list + ")");
    } else if (res.status == 413) {
      replyError(res, 413, "the request body is over the limit of " +
                               std::to_string(limits.maxBodyBytes) + " bytes (--max-body-bytes)");
    } else {
      replyError(res, res.status, "malformed HTTP request (HTTP " + std::to_string(res.status) +
                                      "): not a request line, headers and body this server "
                                      "reads, or an unknown method");
    }
    return httplib::Server::HandlerResponse::Handled;
  }));

  server.set_exception_handler(
      [](const httplib::Request &, httplib::Response &res, std::exception_ptr) {
        replyError(res, 500, "internal error");
      });
}

} // namespace tc_service

//===- http_api.h - tc-service's routes: JSON in, JSON out -----*- C++ -*-===//
//
// The HTTP face of a Model (model.h) on a cpp-httplib server. Every request
// body is JSON and checked field by field before the model sees it; every
// reply is a JSON object, and every error reply is {"error": MESSAGE} with a
// 4xx status naming what the request got wrong (400 malformed, 404 unknown
// route, 405 wrong method, 409 a job already running / none running, 413
// body over --max-body-bytes).
//
//===----------------------------------------------------------------------===//
#ifndef TC_EXAMPLES_SERVICE_HTTP_API_H
#define TC_EXAMPLES_SERVICE_HTTP_API_H

#include <cstddef>
#include <cstdint>

namespace httplib {
class Server;
}

namespace tc_service {

class Model;

struct ApiLimits {
  size_t maxBodyBytes = 1 << 20;
  int64_t maxNewTokens = 256; ///< POST /infer's "generate"
  int64_t maxSteps = 1000000; ///< POST /train/start's "steps"
};

/// Registers the routes, the error handler and the body limit on `server`;
/// `model` must outlive it.
void installRoutes(httplib::Server &server, Model &model, const ApiLimits &limits);

} // namespace tc_service

#endif // TC_EXAMPLES_SERVICE_HTTP_API_H

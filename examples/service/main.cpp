//===- main.cpp - tc-service: an HTTP/JSON server around one artifact ------===//
//
//   tc-service MODEL.tca [--host 127.0.0.1] [--port 8080] [--device cpu|cuda]
//              [--max-body-bytes 1048576] [--max-new-tokens 256] [--threads 8]
//
// Loads the artifact, prints "tc-service: listening on http://HOST:PORT"
// (--port 0 picks a free port, which that line names), serves until SIGINT
// or SIGTERM, then stops the training job and exits 0. The routes are in
// http_api.cpp and docs/service.md.
//
// Signals are blocked in every thread and taken by one that sigwait()s, so
// stopping is an ordinary call (Server::stop) rather than work done inside a
// signal handler.
//
//===----------------------------------------------------------------------===//
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <pthread.h>

#include <httplib.h>

#include "examples/service/http_api.h"
#include "examples/service/model.h"

namespace {

const char *kUsage =
    "usage: tc-service MODEL.tca [--host ADDR] [--port N] [--device cpu|cuda]\n"
    "                  [--max-body-bytes N] [--max-new-tokens N] [--threads N]\n"
    "  MODEL.tca          an artifact of tc-compile (--train for POST /train/*)\n"
    "  --host ADDR        the address to bind (127.0.0.1; 0.0.0.0 for every interface)\n"
    "  --port N           the port (8080; 0 picks a free one, printed on start)\n"
    "  --device cpu|cuda  where the model runs (cpu)\n"
    "  --max-body-bytes N larger request bodies get 413 (1048576)\n"
    "  --max-new-tokens N most tokens POST /infer generates (256)\n"
    "  --threads N        requests served at once (8)\n";

struct Options {
  std::string artifact, host = "127.0.0.1", device = "cpu";
  int port = 8080;
  tc_service::ApiLimits limits;
  int threads = 8;
};

/// A whole number in [min, max] from a flag's value, else exits 2.
long long number(const char *flag, const char *text, long long min, long long max) {
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno || end == text || *end || v < min || v > max) {
    std::fprintf(stderr, "tc-service: %s wants a whole number in [%lld, %lld], got '%s'\n", flag,
                 min, max, text);
    std::exit(2);
  }
  return v;
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (a.rfind("--", 0) != 0) {
      if (!o.artifact.empty()) {
        std::fprintf(stderr, "tc-service: one artifact only (got '%s' and '%s')\n%s",
                     o.artifact.c_str(), a.c_str(), kUsage);
        std::exit(2);
      }
      o.artifact = a;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "tc-service: %s needs a value\n%s", a.c_str(), kUsage);
      std::exit(2);
    }
    const char *v = argv[++i];
    if (a == "--host")
      o.host = v;
    else if (a == "--port")
      o.port = static_cast<int>(number("--port", v, 0, 65535));
    else if (a == "--device")
      o.device = v;
    else if (a == "--max-body-bytes")
      o.limits.maxBodyBytes = static_cast<size_t>(number("--max-body-bytes", v, 1, 1LL << 32));
    else if (a == "--max-new-tokens")
      o.limits.maxNewTokens = number("--max-new-tokens", v, 0, 1 << 20);
    else if (a == "--threads")
      o.threads = static_cast<int>(number("--threads", v, 1, 1024));
    else {
      std::fprintf(stderr, "tc-service: unknown flag %s\n%s", a.c_str(), kUsage);
      std::exit(2);
    }
  }
  if (o.artifact.empty()) {
    std::fprintf(stderr, "tc-service: no artifact given\n%s", kUsage);
    std::exit(2);
  }
  if (o.device != "cpu" && o.device != "cuda") {
    std::fprintf(stderr, "tc-service: --device wants cpu or cuda, got '%s'\n", o.device.c_str());
    std::exit(2);
  }
  return o;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);

  // Blocked here, before any thread starts, so every thread inherits it.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

  std::string error;
  std::unique_ptr<tc_service::Model> model = tc_service::Model::load(o.artifact, o.device, &error);
  if (!model) {
    std::fprintf(stderr, "tc-service: %s\n", error.c_str());
    return 2;
  }

  httplib::Server server;
  int threads = o.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  tc_service::installRoutes(server, *model, o.limits);
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, with which a
  // second tc-service on the same port would start and share its requests.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });

  int port = o.port;
  if (port == 0) {
    port = server.bind_to_any_port(o.host);
    if (port < 0) {
      std::fprintf(stderr, "tc-service: cannot bind %s on any port\n", o.host.c_str());
      return 2;
    }
  } else if (!server.bind_to_port(o.host, port)) {
    std::fprintf(stderr, "tc-service: cannot bind %s:%d (in use, or not an address here)\n",
                 o.host.c_str(), port);
    return 2;
  }

  std::atomic<bool> signalled{false};
  std::thread stopper([&server, &signalled, stopSignals] {
    int sig = 0;
    sigwait(&stopSignals, &sig);
    signalled = true;
    std::fprintf(stderr, "tc-service: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
  });

  std::printf("tc-service: listening on http://%s:%d (%s, %s)\n", o.host.c_str(), port,
              o.artifact.c_str(), o.device.c_str());
  std::fflush(stdout);
  bool ok = server.listen_after_bind();
  if (!signalled) // listen failed by itself: let the stopper go too
    pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();

  tc_service::JobStatus last;
  tc_service::Failure ignored;
  model->stopJob(&last, &ignored); // 409 when no job runs: nothing to stop
  model.reset();
  std::fprintf(stderr, "tc-service: stopped\n");
  return ok ? 0 : 1;
}

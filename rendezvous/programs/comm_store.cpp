// comm-store: a standalone TcpStore server, for jobs whose ranks are started by something that
// hosts no store itself. Ranks then run with COMM_STORE_EXTERNAL=1 so rank 0 connects to it
// instead of hosting its own.
//
//   comm-store --port 29500 [--host ADDRESS]
//
// Without a job secret anyone who can reach the store can read and write it, so it then listens
// on loopback only unless --host says otherwise, and says so.
#include <getopt.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "comm/store.hpp"
#include "libcomm/base/job_secret.hpp"
#include "rendezvous/init_method.hpp"

int main(int argc, char** argv) {
  std::uint16_t port = 0;
  std::string host;
  bool host_given = false;
  constexpr const char* kUsage =
      "usage: comm-store [--port PORT] [--host ADDRESS]\n"
      "Serves a libcomm TcpStore until SIGINT or SIGTERM; port 0 or none: any free port.\n"
      "With COMM_JOB_TOKEN (or COMM_JOB_TOKEN_FILE) set, only clients that prove they hold\n"
      "that secret may use it, on every interface unless --host names one. Without it, anyone\n"
      "who can reach the store may use it: it listens on 127.0.0.1 unless --host names another\n"
      "address (--host 0.0.0.0: every interface).\n";
  static constexpr option kLongOptions[] = {{"port", required_argument, nullptr, 'p'},
                                            {"host", required_argument, nullptr, 'H'},
                                            {"help", no_argument, nullptr, 'h'},
                                            {nullptr, 0, nullptr, 0}};
  opterr = 0;  // a wrong flag gets the usage, as before
  for (int flag; (flag = ::getopt_long(argc, argv, ":h", kLongOptions, nullptr)) != -1;) {
    if (flag == 'H') {
      host = optarg;
      host_given = true;
    } else if (flag == 'p') {
      try {
        port = comm::parse_port(optarg, "--port");
      } catch (const comm::Error& error) {
        std::fprintf(stderr, "comm-store: %s\n", error.what());
        return 2;
      }
    } else {
      std::fputs(kUsage, stderr);
      return flag == 'h' ? 0 : 2;
    }
  }
  if (optind < argc) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the server thread starts
  try {
    bool has_secret = comm::resolve_job_secret(std::nullopt).has_value();
    if (!has_secret && !host_given) host = "127.0.0.1";
    comm::TcpStoreServer server(port, host);  // the job secret, if any, from COMM_JOB_TOKEN(_FILE)
    if (!has_secret) {
      std::fprintf(stderr,
                   "comm-store: warning: no job secret (COMM_JOB_TOKEN): any program that can reach %s may read "
                   "and write this store and join its jobs%s\n",
                   host_given ? host.c_str() : "127.0.0.1",
                   host_given ? "" : "; listening on loopback only (--host 0.0.0.0 to serve other hosts)");
    }
    std::printf("comm-store: listening on port %u\n", static_cast<unsigned>(server.port()));
    std::fflush(stdout);
    int received = 0;
    sigwait(&stop, &received);
    std::printf("comm-store: stopping on signal %d with %zu client(s) connected\n", received, server.client_count());
  } catch (const comm::Error& error) {
    std::fprintf(stderr, "comm-store: %s\n", error.what());
    return 1;
  }
  return 0;
}

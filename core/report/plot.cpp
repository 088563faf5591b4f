#include "core/report/plot.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string_view>

#include "core/util/file.h"
#include "simd/error.h"

extern char** environ;

namespace llmcpu {

namespace {

constexpr const char* kInstallHint = "apt-get install gnuplot-nox";

std::string lower(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
  return s;
}

bool has_control(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// One series as a datablock: `$NAME << EOD`, "step loss" lines of the finite points, `EOD`. Empty
// if no point is finite.
std::string datablock(const std::string& name, const std::vector<LossPoint>& points) {
  std::string out;
  char line[64];
  for (const LossPoint& p : points) {
    if (!std::isfinite(p.loss)) continue;
    std::snprintf(line, sizeof line, "%lld %.9g\n", static_cast<long long>(p.step), p.loss);
    out += line;
  }
  if (out.empty()) return out;
  return "$" + name + " << EOD\n" + out + "EOD\n";
}

// Everything gnuplot wrote (its standard output and error went to `f`), the last 2000 bytes.
std::string read_messages(std::FILE* f) {
  std::string text;
  std::rewind(f);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.size() > 2000) text = "..." + text.substr(text.size() - 2000);
  return text;
}

// Writes all of `text` to `fd`; false (errno set) if the reader went away or the write failed.
// SIGPIPE is blocked on this thread meanwhile, and one it raised is taken back, so that a gnuplot
// that exits early is an error here rather than the end of the process.
bool write_all_no_sigpipe(int fd, std::string_view text) {
  sigset_t pipe_set, old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  bool ok = true;
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    text.remove_prefix(size_t(n));
  }
  const int saved = errno;
  if (!ok && saved == EPIPE) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = saved;
  return ok;
}

// Runs gnuplot with `script` on its standard input. Returns gnuplot's messages on failure, or
// throws an Error saying how to install it when it is missing.
std::string run_gnuplot(const std::string& script) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw Error("plot: cannot make a pipe to gnuplot: " + errno_message(errno));
  }
  std::FILE* messages = std::tmpfile();
  if (!messages) {
    const int err = errno;
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw Error("plot: cannot make a temporary file for gnuplot's messages: " + errno_message(err));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], 0);
  posix_spawn_file_actions_adddup2(&actions, fileno(messages), 1);
  posix_spawn_file_actions_adddup2(&actions, fileno(messages), 2);
  char name[] = "gnuplot";
  char* argv[] = {name, nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, name, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[0]);
  if (spawned != 0) {
    ::close(pipe_fds[1]);
    std::fclose(messages);
    if (spawned == ENOENT) {
      throw Error(std::string("plot: gnuplot is not installed (it draws the plot): ") +
                  kInstallHint);
    }
    throw Error("plot: cannot start gnuplot: " + errno_message(spawned));
  }
  const bool written = write_all_no_sigpipe(pipe_fds[1], script);
  const int write_errno = errno;
  ::close(pipe_fds[1]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string problem;
  if (WIFSIGNALED(status)) {
    problem = "gnuplot was killed by signal " + std::to_string(WTERMSIG(status));
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    problem = std::string("gnuplot could not be run: ") + kInstallHint;
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    problem = "gnuplot failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
  } else if (!written) {
    problem = "writing the script to gnuplot failed: " + errno_message(write_errno);
  }
  if (!problem.empty()) {
    const std::string said = read_messages(messages);
    if (!said.empty()) problem += ":\n" + said;
  }
  std::fclose(messages);
  return problem;
}

}  // namespace

PlotFormat plot_format_of(const std::string& output, const std::string& flag) {
  const std::string name = lower(output);
  if (name.size() > 4 && name.ends_with(".png")) return PlotFormat::kPng;
  if (name.size() > 4 && name.ends_with(".svg")) return PlotFormat::kSvg;
  throw UsageError(flag + " " + output + ": the plot's file name must end in .png or .svg (the " +
                   "format is chosen by it)");
}

void check_plot_options(const PlotOptions& options, const std::string& flag) {
  if (options.output.empty()) throw UsageError(flag + " FILE.png|FILE.svg is required");
  plot_format_of(options.output, flag);
  if (has_control(options.output)) {
    throw UsageError(flag + ": the file name has a control character (newline, tab, ...)");
  }
  if (has_control(options.title)) {
    throw UsageError("--title: the title has a control character (newline, tab, ...)");
  }
  for (const auto& [what, pixels] :
       {std::pair{"--width", options.width}, {"--height", options.height}}) {
    if (pixels < kMinPixels || pixels > kMaxPixels) {
      throw UsageError(std::string(what) + " " + std::to_string(pixels) + ": expected " +
                       std::to_string(kMinPixels) + " to " + std::to_string(kMaxPixels) +
                       " pixels");
    }
  }
}

std::string find_gnuplot() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/gnuplot";
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  throw Error(std::string("gnuplot is not installed (it draws the loss plot; PATH has no "
                          "gnuplot): ") +
              kInstallHint);
}

std::string gnuplot_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\'')
      out += "''";
    else if (u < 0x20 || u == 0x7f)
      out += '?';
    else
      out += c;
  }
  return out + "'";
}

std::string gnuplot_script(const std::vector<LossCurves>& runs, const PlotOptions& options,
                           const std::string& output_path) {
  const PlotFormat format = plot_format_of(options.output, "plot");
  const std::string size = std::to_string(options.width) + "," + std::to_string(options.height);
  std::string s;
  // noenhanced: ^ _ @ & { } in titles and file names are text, not formatting.
  if (format == PlotFormat::kPng) {
    s += "set terminal pngcairo size " + size + " noenhanced font 'sans,10'\n";
  } else {
    s += "set terminal svg size " + size + " noenhanced font 'sans,10' background '#ffffff'\n";
  }
  s += "set output " + gnuplot_quote(output_path) + "\n";
  if (!options.title.empty()) s += "set title " + gnuplot_quote(options.title) + "\n";
  s += "set xlabel 'step'\nset ylabel 'loss'\nset grid\nset key top right\n";
  if (options.log_scale) s += "set logscale y\n";
  // Each run one colour; its training loss (noisy) half transparent, its validation loss opaque and
  // drawn after every training line, so that no training line hides it.
  static constexpr const char* kColors[] = {"1f77b4", "d62728", "2ca02c", "ff7f0e",
                                            "9467bd", "8c564b", "e377c2", "17becf"};
  std::vector<std::string> train_items, val_items;
  for (size_t r = 0; r < runs.size(); ++r) {
    const LossCurves& run = runs[r];
    const std::string prefix = run.name.empty() ? "" : run.name + " ";
    const std::string color = kColors[r % std::size(kColors)];
    const std::string train = datablock("train" + std::to_string(r), run.train);
    const std::string val = datablock("val" + std::to_string(r), run.val);
    s += train + val;
    if (!train.empty()) {  // gnuplot's #AARRGGBB: AA is the transparency
      train_items.push_back("$train" + std::to_string(r) +
                            " using 1:2 with lines linecolor rgb '#80" + color +
                            "' linewidth 1 title " + gnuplot_quote(prefix + "train"));
    }
    if (!val.empty()) {
      val_items.push_back("$val" + std::to_string(r) +
                          " using 1:2 with linespoints linecolor rgb '#" + color +
                          "' dashtype 2 linewidth 2 pointtype 7 pointsize 0.6 title " +
                          gnuplot_quote(prefix + "val"));
    }
  }
  std::string plot;
  train_items.insert(train_items.end(), val_items.begin(), val_items.end());
  for (const std::string& item : train_items) plot += (plot.empty() ? "" : ", ") + item;
  if (plot.empty()) throw Error("plot: no finite loss to draw (every loss is NaN or infinite)");
  s += "plot " + plot + "\nunset output\n";
  return s;
}

void plot_losses(const std::vector<LossCurves>& runs, const PlotOptions& options) {
  check_plot_options(options, "--output");
  const std::string tmp = options.output + ".tmp." + std::to_string(::getpid());
  const std::string script = gnuplot_script(runs, options, tmp);
  std::string problem;
  try {
    problem = run_gnuplot(script);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  struct stat st;
  if (problem.empty() && (::stat(tmp.c_str(), &st) != 0 || st.st_size == 0)) {
    problem = "gnuplot wrote no image to " + tmp;
  }
  if (problem.empty() && ::rename(tmp.c_str(), options.output.c_str()) != 0) {
    problem = "cannot rename " + tmp + " to it: " + errno_message(errno);
  }
  if (!problem.empty()) {
    ::unlink(tmp.c_str());
    throw FileError(options.output, "plot not written: " + problem);
  }
}

}  // namespace llmcpu

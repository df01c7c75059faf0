// A prepared SQLite statement that owns itself and throws genperf::Error naming the store's file,
// for the results store (src/study/store.cpp). Values bind by position from 1, in call order.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "genperf/error.h"

namespace genperf::study {

[[noreturn]] inline void sqlite_fail(sqlite3* db, const std::string& file, const std::string& what) {
  fail("[study] ", file, ": ", what, ": ", sqlite3_errmsg(db));
}

class Statement {
 public:
  Statement(sqlite3* db, const char* sql, const std::string& file) : db_(db), file_(file) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) sqlite_fail(db, file, "cannot prepare a query");
  }
  ~Statement() { sqlite3_finalize(s_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  template <typename... Values>
  Statement& bind(const Values&... v) {
    sqlite3_reset(s_);
    int i = 0;
    (bind_one(++i, v), ...);
    return *this;
  }
  // True while a row is there to read; false when the statement is done.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) sqlite_fail(db_, file_, "query failed");
    return false;
  }
  // Runs a statement that returns no rows.
  void run() {
    while (step()) {
    }
  }
  int64_t integer(int col) const { return sqlite3_column_int64(s_, col); }
  double real(int col) const { return sqlite3_column_double(s_, col); }
  std::string text(int col) const {
    const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return t ? std::string(t, size_t(sqlite3_column_bytes(s_, col))) : std::string();
  }

 private:
  void bind_one(int i, int64_t v) { check(sqlite3_bind_int64(s_, i, v)); }
  void bind_one(int i, int v) { check(sqlite3_bind_int64(s_, i, v)); }
  void bind_one(int i, double v) { check(sqlite3_bind_double(s_, i, v)); }
  void bind_one(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT));
  }
  void bind_one(int i, const char* v) { check(sqlite3_bind_text(s_, i, v, -1, SQLITE_TRANSIENT)); }
  void check(int rc) {
    if (rc != SQLITE_OK) sqlite_fail(db_, file_, "cannot bind a value");
  }
  sqlite3* db_;
  std::string file_;
  sqlite3_stmt* s_ = nullptr;
};

// The integer a query's first row starts with (0 when it has no row). The statement ends here,
// so nothing it read stays locked.
inline int64_t query_integer(sqlite3* db, const char* sql, const std::string& file) {
  Statement q(db, sql, file);
  return q.step() ? q.integer(0) : 0;
}

}  // namespace genperf::study

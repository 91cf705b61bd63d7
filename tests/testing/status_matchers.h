// GoogleTest assertions for hubload's Status and Result<T>: the failure
// message is the status itself (code, reason, message naming repo/file/field).
//
//   ASSERT_OK(client.Download(req));   EXPECT_OK(st);
#pragma once

#include <gtest/gtest.h>

#include "hubload/status.h"

namespace hubload::testing {

inline ::testing::AssertionResult IsOk(const Status& st) {
  if (st.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << st.ToString();
}
template <typename T>
::testing::AssertionResult IsOk(const Result<T>& r) {
  return IsOk(r.status());
}
/// Any other value with ok() (a test's own outcome type): no status to print.
template <typename T>
  requires requires(const T& v) { static_cast<bool>(v.ok()); }
::testing::AssertionResult IsOk(const T& v) {
  if (v.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "not ok";
}

}  // namespace hubload::testing

#define EXPECT_OK(expr) EXPECT_TRUE(::hubload::testing::IsOk(expr))
#define ASSERT_OK(expr) ASSERT_TRUE(::hubload::testing::IsOk(expr))

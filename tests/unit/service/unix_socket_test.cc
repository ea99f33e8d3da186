// The Unix socket listener's file handling (server/service/unix_socket.h): address forms, what
// may be replaced at the path and what must not, the mode, and removing only our own file.
#include "server/service/unix_socket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace chgate::service {
namespace {

using ::testing::HasSubstr;

// A fresh directory under the test's temporary directory, removed with everything in it.
class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "chgate-sock-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    dir_ = pattern;
    path_ = dir_ + "/api.sock";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }

  // A socket bound at `path_`; listening when `listen` is set. Returns the descriptor.
  int Bind(bool listen) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
        << std::strerror(errno);
    if (listen) {
      EXPECT_EQ(::listen(fd, 4), 0);
    }
    return fd;
  }

  bool IsSocket() const {
    struct stat st {};
    return ::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
  }

  std::string dir_;
  std::string path_;
};

TEST(UnixSocketPathTest, TakesGrpcsUnixFormsOnly) {
  EXPECT_EQ(UnixSocketPath("unix:/run/chgate/api.sock"), "/run/chgate/api.sock");
  EXPECT_EQ(UnixSocketPath("unix:relative.sock"), "relative.sock");
  EXPECT_EQ(UnixSocketPath("unix:///run/chgate/api.sock"), "/run/chgate/api.sock");
  EXPECT_EQ(UnixSocketPath("127.0.0.1:50051"), std::nullopt);
  EXPECT_EQ(UnixSocketPath("[::1]:50051"), std::nullopt);
  EXPECT_EQ(UnixSocketPath("unix-abstract:chgate"), std::nullopt);
}

TEST_F(UnixSocketTest, NothingAtThePathIsReady) { EXPECT_TRUE(PrepareUnixSocket(path_).ok()); }

TEST_F(UnixSocketTest, AStaleSocketIsRemoved) {
  ::close(Bind(/*listen=*/false));  // what a killed server leaves: the file, nobody accepting
  ASSERT_TRUE(IsSocket());
  EXPECT_TRUE(PrepareUnixSocket(path_).ok());
  EXPECT_FALSE(IsSocket());
}

TEST_F(UnixSocketTest, ALiveServersSocketIsRefusedAndKept) {
  const int fd = Bind(/*listen=*/true);
  absl::Status status = PrepareUnixSocket(path_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("another server accepts connections on " + path_));
  EXPECT_TRUE(IsSocket());
  ::close(fd);
}

TEST_F(UnixSocketTest, AFileThatIsNotASocketIsNeverRemoved) {
  { std::ofstream(path_) << "data"; }
  absl::Status status = PrepareUnixSocket(path_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("is not a socket"));
  std::ifstream in(path_);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "data");
}

TEST_F(UnixSocketTest, APathTooLongForASocketAddressIsRefusedWithItsLength) {
  const std::string path = dir_ + "/" + std::string(120, 'x');
  absl::Status status = PrepareUnixSocket(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("holds at most 107"));
  EXPECT_EQ(PrepareUnixSocket("").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(UnixSocketTest, FinishSetsTheModeAndRemoveTakesOnlyThatFile) {
  const int first = Bind(/*listen=*/true);
  absl::StatusOr<UnixSocketFile> file = FinishUnixSocket(path_, 0660);
  ASSERT_TRUE(file.ok()) << file.status();
  struct stat st {};
  ASSERT_EQ(::lstat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  ASSERT_TRUE(FinishUnixSocket(path_, 0600).ok());
  ASSERT_EQ(::lstat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Another process took the path over since: its socket is not ours to remove.
  ::close(first);
  ::unlink(path_.c_str());
  const int second = Bind(/*listen=*/true);
  RemoveUnixSocket(*file);
  EXPECT_TRUE(IsSocket());

  absl::StatusOr<UnixSocketFile> own = FinishUnixSocket(path_, 0660);
  ASSERT_TRUE(own.ok());
  RemoveUnixSocket(*own);
  EXPECT_FALSE(IsSocket());
  RemoveUnixSocket(*own);  // already gone: nothing happens
  RemoveUnixSocket({});
  ::close(second);
}

TEST_F(UnixSocketTest, FinishFailsWhenNothingWasBound) {
  EXPECT_EQ(FinishUnixSocket(path_, 0660).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace chgate::service

// Dense matrices and the loops over their cells.
#include <vector>
#include <string>
#include <cstddef>

namespace demo {

template <typename T>
class Matrix {
 public:
  Matrix(int rows, int cols) : rows_(rows), cols_(cols), data_(rows * cols) {}

  void fill(const T &v) {
    for (int i = 0; i < rows_ * cols_; ++i) {
      data_[i] = v;
    }
  }

  T trace() const {
    T sum{};
    for (int i = 0; i < rows_; ++i) sum += at(i, i);
    return sum;
  }

  void transpose() {
    for (int r = 0; r < rows_; ++r) {
      for (int c = r + 1; c < cols_; ++c) {
        std::swap(data_[r * cols_ + c], data_[c * cols_ + r]);
      }
    }
  }

  void clear() {
    for (int i = 0; i < rows_; ++i) {
      // nothing to release per row
    }
    for (int i = 0; i < rows_; ++i) {}
    for (int i = 0; i < rows_; i++) {
      data_[i] = T{};
    }
  }

  const T &at(int r, int c) const { return data_[r * cols_ + c]; }

 private:
  int rows_, cols_;
  std::vector<T> data_;
};

int count_spaces(const std::string &s) {
  int n = 0;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    if (s[i] == ' ') {
      ++n;
    } else if (s[i] == '\t') {
      n += 4;
    }
  }
  return n;
}

void scale(std::vector<double> &xs, double k) {
  for (int i = 0; i < (int)xs.size(); ++i) { xs[i] *= k; }
  for (std::size_t i = 0; i < xs.size(); ++i) {
    xs[i] += 1.0;
  }
  for (int j = 0; j < 10; ++j) {
#ifdef DEBUG
    log(j);
#endif
    xs[0] += j;
  }
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      xs[i] += j; /* inner */
    }
  }
  auto f = [&](int n) {
    for (int i = 0; i < n; ++i) {
      xs.push_back(i);
    }
  };
  f(2);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      xs[i] -= j;
    }
  for (int i = 0; i < 2; ++i) {
    continue;
  }
  for (int i = 0; i < 2; ++i) { break; }
  for (int i = 0; i < 2; ++i) {
    switch (i) {
      case 0:
        break;
      default:
        return;
    }
  }
  for (int i = 0; i < 2; ++i) {
    try {
      xs.at(i);
    } catch (...) {
    }
  }
  for (int i = 0; i < 2; ++i) {
    int k2 = i * 2;
    xs[i] = k2;
  }
}

}  // namespace demo

// The C++ half of the probe module: libc++ containers and algorithms, compiled without exceptions or RTTI.
#include <algorithm>
#include <cstddef>
#include <vector>

extern "C" double
wasmbox_scitest_median(const double *values, std::size_t n)
{
    std::vector<double> v(values, values + n);
    auto mid = v.begin() + static_cast<std::ptrdiff_t>(n / 2);
    std::nth_element(v.begin(), mid, v.end());
    if (n % 2 == 1) {
        return *mid;
    }
    double hi = *mid;
    double lo = *std::max_element(v.begin(), mid);
    return (lo + hi) / 2;
}

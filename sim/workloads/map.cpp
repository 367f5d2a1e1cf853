// sim/workloads/map.cpp - libstdc++'s std::map (a red-black tree): N
// random insertions, then N lookups and N/2 erasures.
// Usage: map [N]   (default 50000)
#include <cstdio>
#include <cstdlib>
#include <map>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 50000;
    std::map<unsigned, unsigned> m;
    unsigned s = 777;
    auto next = [&s] {
        s = s * 1664525u + 1013904223u;
        return s;
    };
    for (long i = 0; i < n; i++)
        m[next() % (4 * static_cast<unsigned>(n))] = static_cast<unsigned>(i);
    unsigned long found = 0, sum = 0;
    for (long i = 0; i < n; i++) {
        auto it = m.find(next() % (4 * static_cast<unsigned>(n)));
        if (it != m.end()) {
            found++;
            sum += it->second;
        }
    }
    for (long i = 0; i < n / 2; i++) m.erase(next() % (4 * static_cast<unsigned>(n)));
    for (auto &kv : m) sum = sum * 3 + kv.first;
    printf("map: %zu keys left, %lu found, checksum %lu\n", m.size(), found, sum);
    return 0;
}

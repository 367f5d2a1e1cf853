// cxx/unwind.cpp - a caching DWARF CFI unwinder for x86-64 (cxx/unwind.hpp):
// the FDE of a PC found through the Linux Standard Base's .eh_frame_hdr of
// the object holding it, and the frame states kept by PC (the frame
// information itself is read by cxx/cfi.cpp).
#include "unwind.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace tk::unw
{
namespace
{

// ---- finding the FDE ----
bool find_fde(uintptr_t pc, const uint8_t **fde_out, uintptr_t *hdr_out, uintptr_t *base_out)
{
    struct dl_find_object dlfo;
    if (_dl_find_object(reinterpret_cast<void *>(pc), &dlfo) != 0 || !dlfo.dlfo_eh_frame)
        return false;
    const uint8_t *hdr = static_cast<const uint8_t *>(dlfo.dlfo_eh_frame);
    reader r{hdr};
    if (r.u8() != 1) return false;
    uint8_t frame_enc = r.u8(), count_enc = r.u8(), table_enc = r.u8();
    uintptr_t base = reinterpret_cast<uintptr_t>(hdr), eh_frame, count;
    if (!r.ptr(frame_enc, base, 0, &eh_frame) || !r.ptr(count_enc, base, 0, &count)) return false;
    *hdr_out = base;
    *base_out = reinterpret_cast<uintptr_t>(dlfo.dlfo_map_start);
    if (table_enc != 0x3b || count == 0) return false; // datarel | sdata4: what every linker writes
    const int32_t *table = reinterpret_cast<const int32_t *>(r.p);
    size_t lo = 0, hi = count;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (base + static_cast<intptr_t>(table[2 * mid]) <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if (base + static_cast<intptr_t>(table[2 * lo]) > pc) return false;
    *fde_out = reinterpret_cast<const uint8_t *>(base + static_cast<intptr_t>(table[2 * lo + 1]));
    return true;
}

// ---- the cache ----
struct entry {
    std::atomic<uintptr_t> pc{0};
    uintptr_t hdr = 0, base = 0;
    frame_state fs;
};
constexpr size_t CACHE = 4096;
entry cache[CACHE];
std::mutex cache_lock;
std::atomic<uint64_t> n_hits, n_misses, n_recomputed;

// compute(), also saying which object's tables it used (its eh_frame_hdr
// and load address).
bool compute_in(uintptr_t pc, frame_state *out, uintptr_t *hdr, uintptr_t *base)
{
    const uint8_t *fde;
    return find_fde(pc, &fde, hdr, base) && fde_state(fde, pc, out);
}

} // namespace

bool compute(uintptr_t pc, frame_state *out)
{
    uintptr_t hdr, base;
    return compute_in(pc, out, &hdr, &base);
}

bool state_for(uintptr_t pc, frame_state *out)
{
    // two ways: a PC may sit in either slot of its pair, so two PCs of one
    // walk that hash alike do not evict each other on every walk
    size_t i = (pc * 0x9e3779b97f4a7c15ull >> 52) % CACHE;
    {
        std::lock_guard<std::mutex> g(cache_lock);
        for (size_t j : {i, i ^ 1}) {
            entry &e = cache[j];
            if (e.pc.load(std::memory_order_relaxed) != pc) continue;
            // still the same object at that address?
            struct dl_find_object dlfo;
            if (_dl_find_object(reinterpret_cast<void *>(pc), &dlfo) == 0 &&
                reinterpret_cast<uintptr_t>(dlfo.dlfo_eh_frame) == e.hdr &&
                reinterpret_cast<uintptr_t>(dlfo.dlfo_map_start) == e.base) {
                *out = e.fs;
                n_hits++;
                return true;
            }
            n_recomputed++;
            break;
        }
    }
    n_misses++;
    frame_state fs;
    uintptr_t hdr, base;
    if (!compute_in(pc, &fs, &hdr, &base)) return false;
    std::lock_guard<std::mutex> g(cache_lock);
    // the slot of the pair that is free or already this PC's; else the
    // first
    entry *ep = &cache[i];
    for (size_t j : {i, i ^ 1}) {
        uintptr_t p = cache[j].pc.load(std::memory_order_relaxed);
        if (p == 0 || p == pc) {
            ep = &cache[j];
            break;
        }
    }
    entry &e = *ep;
    e.hdr = hdr;
    e.base = base;
    e.fs = fs;
    e.pc.store(pc, std::memory_order_relaxed);
    *out = fs;
    return true;
}

cache_stats stats()
{
    return {n_hits.load(), n_misses.load(), n_recomputed.load()};
}

} // namespace tk::unw

// A CUDA emulation for tests: the CUDA renderer's .cu text compiles with g++ as C++20 and
// runs on the CPU, so its kernels are checked against NumPy on a machine without a GPU.
//
// Each thread of a block is an OS thread (std::thread); blocks run one after another, so
// a kernel's __shared__ arrays are function-local statics the block's threads share.
// __syncthreads() is the block's std::barrier; a warp's shuffles go through an exchange
// buffer of 32 slots between two waits on the warp's own barrier (every lane of the warp
// must call them, as the full mask 0xffffffff says on a GPU). threadIdx, blockIdx,
// blockDim and gridDim are thread_local.
//
// tg_emu::launch(kernel, grid, block, args) runs ``kernel`` as cuLaunchKernel would:
// ``args[i]`` points at the i-th argument's value. A block's size must be a multiple of 32.
#pragma once
#include <barrier>
#include <cstdint>
#include <cstring>
#include <math.h>           // libstdc++'s wrapper: exp, tanh, isnan ... overloaded per type
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct tg_dim3 {
    unsigned x, y, z;
};

thread_local tg_dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace tg_emu {

struct Warp {
    std::barrier<> bar{32};
    uint64_t slot[32];
};

thread_local std::barrier<> *block_barrier;
thread_local Warp *warp;

template <typename T>
T exchange(T v, int from_lane) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "a shuffle moves at most 8 bytes");
    const int lane = threadIdx.x % 32;
    std::memcpy(&warp->slot[lane], &v, sizeof(T));
    warp->bar.arrive_and_wait();
    T out = v;
    if (from_lane >= 0 && from_lane < 32)
        std::memcpy(&out, &warp->slot[from_lane], sizeof(T));
    warp->bar.arrive_and_wait();        // nobody writes the next exchange before all read
    return out;
}

template <typename... A, std::size_t... I>
void call(void (*kernel)(A...), void **args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<A> *>(args[I])...);
}

template <typename... A>
void launch(void (*kernel)(A...), unsigned grid, unsigned block, void **args) {
    for (unsigned b = 0; b < grid; b++) {
        std::barrier<> bar(block);
        std::vector<std::unique_ptr<Warp>> warps;
        for (unsigned w = 0; w < (block + 31) / 32; w++)
            warps.push_back(std::make_unique<Warp>());
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block; t++)
            threads.emplace_back([&, t] {
                threadIdx = {t, 0, 0};
                blockIdx = {b, 0, 0};
                blockDim = {block, 1, 1};
                gridDim = {grid, 1, 1};
                block_barrier = &bar;
                warp = warps[t / 32].get();
                call(kernel, args, std::index_sequence_for<A...>{});
            });
        for (auto &th : threads)
            th.join();
    }
}

}  // namespace tg_emu

inline void __syncthreads() { tg_emu::block_barrier->arrive_and_wait(); }

template <typename T>
T __shfl_down_sync(unsigned, T v, int delta, int width = 32) {
    const int lane = threadIdx.x % 32;
    return tg_emu::exchange(v, lane % width + delta < width ? lane + delta : lane);
}

template <typename T>
T __shfl_sync(unsigned, T v, int src, int width = 32) {
    const int lane = threadIdx.x % 32;
    return tg_emu::exchange(v, lane / width * width + src % width);
}

template <typename T>
T __shfl_xor_sync(unsigned, T v, int mask) {
    return tg_emu::exchange(v, (int)(threadIdx.x % 32) ^ mask);
}

inline float __int_as_float(int bits) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// CUDA's device math that C's <math.h> has not
inline float rsqrt(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html) as
// TP_* macros. Under Clang with -Wthread-safety (tools/ci.d/07-clang-tidy.sh) they make the
// compiler check that guarded members are touched only with their mutex held and that
// ...Locked() functions are called only under it; under other compilers they expand to nothing.
//
// Contract: annotations only, no code. Use them on common/mutex.h's Mutex (std::mutex carries no
// annotations in libstdc++). Put TP_GUARDED_BY(mu_) after a member, TP_REQUIRES(mu_) on a
// function that needs the lock held, TP_EXCLUDES(mu_) on one that takes it itself.
#pragma once

#if defined(__clang__)
#define TP_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define TP_THREAD_ANNOTATION_(x)
#endif

#define TP_CAPABILITY(name) TP_THREAD_ANNOTATION_(capability(name))
#define TP_SCOPED_CAPABILITY TP_THREAD_ANNOTATION_(scoped_lockable)
#define TP_GUARDED_BY(mu) TP_THREAD_ANNOTATION_(guarded_by(mu))
#define TP_PT_GUARDED_BY(mu) TP_THREAD_ANNOTATION_(pt_guarded_by(mu))
#define TP_REQUIRES(...) TP_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define TP_EXCLUDES(...) TP_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define TP_ACQUIRE(...) TP_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define TP_RELEASE(...) TP_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define TP_TRY_ACQUIRE(...) TP_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define TP_RETURN_CAPABILITY(x) TP_THREAD_ANNOTATION_(lock_returned(x))
#define TP_NO_THREAD_SAFETY_ANALYSIS TP_THREAD_ANNOTATION_(no_thread_safety_analysis)

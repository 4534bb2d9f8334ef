#!/usr/bin/env bash
# What runs on the GPU machine (device tool) to verify the CUDA paths, in one call:
#   the gpu test suite, `kgym demo` on the GPU, the CUDA benchmarks, and, with two or
#   more GPUs, the multi-GPU scaling run. Binaries come from a build copied by
#   bench/device_stage.sh into .devbuild; libraries from .devlibs (see
#   ../shared/device/README.md). Logs go to $OUT.
#   bench/device_verify.sh [tests] [python] [profile] [demo] [bench] [scaling] [ops] [pool] [throughput]
#   (python: the PyTorch tasks' gpu test, tests/test_python_gpu, with $KGYM_PYTHON, default
#    /opt/torch/.venv/bin/python3)
#   (ops: broker and CUDA workers with metrics, the examples twice, the admin's view)
#   (pool: the PyTorch pool through kgym eval, bench/pytorch_pool.sh; POOL_TASKS picks tasks)
#   (profile: the profiler's cases, then the whole gpu suite, with per-case output)
#   (throughput, issue #15: GPU inputs equal the host's float generator (CK_RUN_CASE=gen),
#    bench_cuda gen relu repeat, then bench/stream.sh: STREAM_JOBS (default 400) distinct
#    candidates through a broker and one CUDA worker, the mix, the mix with a 100x slow
#    candidate, and the old pools; docs/benchmarks.md "A GPU that never waits")
set -u
export LD_LIBRARY_PATH=$PWD/.devlibs/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=$PWD/.devbuild
export KGYM_SOURCE_DIR=$PWD KGYM_RUNNER=$B/worker/cpu/kgym-runner \
       KGYM_CUDA_RUNNER=$B/worker/cuda/kgym-cuda-runner KGYM_NVRTC=$B/worker/cuda/kgym-nvrtc \
       KGYM_CACHE_DIR=$(mktemp -d) KGYM_BUILD_DIR=$B
OUT=${OUT:-/tmp}
steps=${*:-tests demo bench scaling}
nvidia-smi -L
for step in $steps; do
    echo "=== $step"
    case $step in
        tests)   (cd $B/tests && ./test_cuda_backend) 2>&1 | tee $OUT/gpu_tests.log | tail -n 60 ;;
        python)  (cd $B/tests && KGYM_PYTHON=${KGYM_PYTHON:-/opt/torch/.venv/bin/python3} \
                    KGYM_PYRUNNER=$KGYM_SOURCE_DIR/worker/python/kgym_pyrunner.py CK_VERBOSITY=verbose \
                    ./test_python_gpu) 2>&1 | tee $OUT/python_gpu.log | tail -n 30 ;;
        profile)
            (cd $B/tests && CK_RUN_CASE=profile CK_VERBOSITY=verbose timeout ${PROFILE_LIMIT:-240} \
                stdbuf -oL ./test_cuda_backend) > $OUT/profile.log 2>&1
            echo "profile case exit $?" >> $OUT/profile.log
            (cd $B/tests && CK_RUN_CASE=gpu CK_VERBOSITY=verbose timeout ${GPU_LIMIT:-280} \
                stdbuf -oL ./test_cuda_backend) > $OUT/gpu.log 2>&1
            echo "gpu case exit $?" >> $OUT/gpu.log
            grep -hE "^(PROFILE|AGREE|HAND|NOOP|ROOF|OFF)|exit [0-9]|Checks|:F:|:E:" $OUT/profile.log
            grep -hE "split_|exit [0-9]|Checks|:F:|:E:" $OUT/gpu.log ;;
        demo)    $B/client/kgym demo 2>&1 | tee $OUT/demo.log | tail -n 50 ;;
        bench)   $B/bench/bench_cuda 2>&1 | tee $OUT/bench_cuda.log | tail -n 40 ;;
        scaling) OUT=$OUT bench/gpu_scaling.sh $B ${JOBS:-2000} 2>&1 | tee $OUT/scaling.log ;;
        ops)     OUT=$OUT bench/gpu_ops.sh $B 2>&1 | tee $OUT/ops.log ;;
        pool)    KGYM=$B/client/kgym OUT=$OUT bench/pytorch_pool.sh ${POOL_TASKS:-} 2>&1 \
                     | tee $OUT/pool.log | tail -n 80 ;;
        throughput)
            (cd $B/tests && CK_RUN_CASE=gen CK_VERBOSITY=verbose timeout 120 ./test_cuda_backend) \
                > $OUT/gen.log 2>&1
            echo "gen case exit $?" >> $OUT/gen.log
            grep -hE "exit [0-9]|Checks|:F:|:E:" $OUT/gen.log
            timeout ${BENCH_LIMIT:-200} $B/bench/bench_cuda gen relu repeat 2>&1 | tee $OUT/bench_throughput.log \
                | grep -E "^(gen|relu|repeat|BENCH)"
            OUT=$OUT timeout ${STREAM_LIMIT:-300} bench/stream.sh $B cuda ${STREAM_JOBS:-400} 2>&1 \
                | tee $OUT/stream.log | grep -E "^(backend|stream|mix|BENCH)" ;;
    esac
done

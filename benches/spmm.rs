//! Criterion groups `spmm_vector_widths` (scalar vs float2 vs float4) and `spmm_half_vector_widths` (half2 vs
//! half4 vs half8, f16 and bf16) on the same problems, with the selected config, cuSPARSE (each CSR algorithm)
//! and cuBLAS GEMM in the same group, so every figure is a ratio from one run.
//! Time is CUDA-event time (`iter_custom`); throughput is reported as FLOP/s (2 * nnz * n "elements").
//!
//! Group `spmm_new_values`: a product after new values of A with the same structure (a pruned weight being
//! trained), `DeviceCsr::set_values_from_device` then `spmm_auto`, beside the product alone, the update alone,
//! cuSPARSE's product (which reads A's values where they are, so an update costs it nothing), and the way without
//! `set_values`: `DeviceCsr::into_parts`, `DeviceCsr::from_device` and `spmm_auto` (host work and downloads, so
//! that one is wall-clock time, `_wall`); and the tuned kernel after `DeviceCsr::update_values`, values written in
//! place (`_in_place_then_tuned`: the writer writes nothing, so it is the blocks' rewrite and the product).
//!
//! Group `spmm_transposed`: C = A^T B. Ours: `DeviceCsr::transpose` once, then `spmm_auto` on A^T (`_ours`), and
//! after new values of A, `CsrTranspose::refresh` then the product (`_refresh_then_ours`). cuSPARSE: its SpMM with
//! A transposed (`_cusparse_transposed_{alg}`, each CSR algorithm that takes it), what a cuSPARSE user writes. The
//! transpositions themselves: ours (`transpose_wall`, wall-clock: a download, the host's counting sort, an upload)
//! and cuSPARSE's CSR to CSC conversion on the device (`cusparse_csr2csc`).
//!
//! Group `spmm_layouts`: C = A * B with B and C column-major (`spmm_layouts`: B transposed on the device, the
//! row-major product, C transposed back; `_ours_col_major`) beside our row-major product (`_ours_row_major`), the
//! transposition of B alone (`_transpose_b`) against a copy of B's bytes (`_copy_b`, the floor of a pass over it),
//! and cuSPARSE's SpMM with B and C column-major (`_cusparse_col_major_{alg}`, each CSR algorithm that takes it).
//!
//! Group `spmm_recorded`: one step's four products over one activation X (three pruned 768 x 768 projections and a
//! 3072 x 768 FFN weight with bias + ReLU, at 90%, n = 16 and 128), issued one by one (`_issued`, `spmm_auto_with`
//! each) and replayed from a recording (`_recorded`, `Gpu::record` once, `Recording::replay`), each in wall-clock
//! time (`_wall`: the host's issue and the device's work, a loop of steps then one synchronisation), and ours also
//! in event time (`_device`) and in the host's time to issue a step while the device is held busy (`_host`);
//! cuSPARSE's SpMM (then the bias + ReLU pass) the same two ways in wall-clock time, each CSR algorithm. Then the
//! four side by side: ours through `spmm_concurrent` (`_concurrent`), cuSPARSE's with the projections on handles of
//! three side streams ordered by events (`_streams`), each issued and recorded.
//!
//! Group `spmm_transfers` (wall-clock time): `DeviceCsr::upload` of a large matrix (the checks, the statistics and
//! the tensor-core block counts on the host, beside the copies) and `DeviceCsr::from_device` of one already on the
//! device (a download, the same host work), beside the floor: the bare copies of the three arrays, in i32. Then
//! `DeviceDense::download` of a 64 MB C beside cudarc's `clone_dtoh` (a fresh vector) and `download_into` a vector
//! whose pages are in use (the copy alone).

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use sprs::CsMat;
use tilesparse::baseline::cublas::Cublas;
use tilesparse::baseline::cusparse::{Cusparse, CusparseCsr2Csc, CusparseSpmm, SpmmAlg};
use tilesparse::spmm::check_config;
use tilesparse::timing::event_time;
use tilesparse::{
    gen, spmm, spmm_auto, spmm_kernel, spmm_tune, DType, DeviceCsr, DeviceDense, Gpu, Scalar, SpmmConfig, TuneOptions,
};

/// GPU 0, or a SKIP line naming `group` and None where there is no GPU or the build has no kernels.
fn gpu_or_skip(group: &str) -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(g) if tilesparse::kernels::KERNELS_BUILT => Some(g),
        Ok(_) => {
            eprintln!("SKIP {group}: this build has no kernels");
            None
        }
        Err(e) => {
            eprintln!("SKIP {group}: no GPU ({e})");
            None
        }
    }
}

/// A group with every group's sampling: 20 samples, 0.3 s of warm-up, 2 s of measurement.
fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    group
}

fn vector_widths(c: &mut Criterion) {
    let Some(gpu) = gpu_or_skip("spmm_vector_widths") else { return };
    let problems = [
        ("uniform_4096_s90_n256", 4096, 4096, 0.1, 256),
        ("uniform_8192x2048_s80_n128", 8192, 2048, 0.2, 128),
        ("uniform_4096_s50_n128", 4096, 4096, 0.5, 128),
    ];
    let mut group = group(c, "spmm_vector_widths");
    for (name, m, k, density, n) in problems {
        let a = gen::uniform_random(m, k, density, 1);
        let b = gen::dense_matrix(k, n, 2);
        let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
        let b_dev = DeviceDense::upload(&gpu, k, n, &b).unwrap();
        let mut c_dev = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
        group.throughput(Throughput::Elements(2 * a.nnz() as u64 * n as u64));
        for (sv, dv) in [(1, 1), (2, 2), (4, 4), (4, 1), (1, 4)] {
            let config: SpmmConfig = format!("spmm_f32_s{sv}d{dv}_y4k32x32w8_u4_nopred").parse().unwrap();
            if check_config(&config, DType::F32, m, k, n).is_err() {
                continue;
            }
            group.bench_function(BenchmarkId::new(format!("s{sv}d{dv}"), name), |bench| {
                bench.iter_custom(|iters| {
                    event_time(&gpu, iters, || spmm(&gpu, &a_dev, &b_dev, &mut c_dev, &config)).unwrap()
                })
            });
        }
        add_selected_and_baselines(&mut group, &gpu, name, &a_dev, &b_dev, &a);
    }
    group.finish();
}

/// Adds the selected config, every cuSPARSE CSR algorithm and cuBLAS GEMM for A (already uploaded as T) * B.
fn add_selected_and_baselines<T: Scalar>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    name: &str,
    a_dev: &DeviceCsr<T>,
    b_dev: &DeviceDense<T>,
    a: &CsMat<T>,
) {
    let (m, k, n) = (a.rows(), a.cols(), b_dev.cols());
    let tag = T::DTYPE;
    let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
    let selected = SpmmConfig::select_with_stats(m, k, n, a_dev.stats(gpu).unwrap(), tag);
    group.bench_function(BenchmarkId::new(format!("{tag}_selected"), name), |bench| {
        bench.iter_custom(|iters| event_time(gpu, iters, || spmm(gpu, a_dev, b_dev, &mut c_dev, &selected)).unwrap())
    });
    add_cusparse(group, gpu, name, a_dev, b_dev);
    if let Ok(blas) = Cublas::new(gpu) {
        let a_dense = gpu.stream().clone_htod(&tilesparse::suite::densify(a)).unwrap();
        let mut c3 = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
        group.bench_function(BenchmarkId::new(format!("{tag}_cublas_gemm"), name), |bench| {
            bench.iter_custom(|iters| {
                event_time(gpu, iters, || blas.gemm_row_major(gpu, &a_dense, b_dev, &mut c3)).unwrap()
            })
        });
    }
}

/// Adds each cuSPARSE CSR algorithm that can run A * B (`{dtype}_cusparse_{alg}`).
fn add_cusparse<T: Scalar>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    name: &str,
    a_dev: &DeviceCsr<T>,
    b_dev: &DeviceDense<T>,
) {
    let lib = Cusparse::new(gpu).unwrap();
    for alg in SpmmAlg::ALL {
        let mut c = DeviceDense::<T>::zeros(gpu, a_dev.rows(), b_dev.cols()).unwrap();
        let Ok(mut op) = CusparseSpmm::new(gpu, &lib, a_dev, b_dev, &mut c, alg) else { continue };
        group.bench_function(BenchmarkId::new(format!("{}_cusparse_{}", T::DTYPE, alg.name()), name), |bench| {
            bench.iter_custom(|iters| event_time(gpu, iters, || op.run(gpu)).unwrap())
        });
    }
}

/// half2 vs half4 vs half8 dense vectors (f16 and bf16, float4-wide sparse loads), with the baselines.
fn half_vector_widths(c: &mut Criterion) {
    let Some(gpu) = gpu_or_skip("spmm_half_vector_widths") else { return };
    let mut group = group(c, "spmm_half_vector_widths");
    let (name, m, k, density, n) = ("uniform_4096_s90_n256", 4096, 4096, 0.1, 256);
    let a32 = gen::uniform_random(m, k, density, 1);
    group.throughput(Throughput::Elements(2 * a32.nnz() as u64 * n as u64));
    half_case::<half::f16>(&mut group, &gpu, name, &a32, n);
    half_case::<half::bf16>(&mut group, &gpu, name, &a32, n);
    group.finish();
}

fn half_case<T: Scalar>(group: &mut BenchmarkGroup<'_, WallTime>, gpu: &Gpu, name: &str, a32: &CsMat<f32>, n: usize) {
    let a: CsMat<T> = gen::convert(a32);
    let (m, k) = (a.rows(), a.cols());
    let b: Vec<T> = gen::dense_matrix(k, n, 2).into_iter().map(T::from_f32).collect();
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
    let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
    for (dv, x) in [(2, 16), (4, 32), (8, 64)] {
        let config: SpmmConfig = format!("spmm_{}_s4d{dv}_y4k32x{x}w8_u4_nopred", T::DTYPE).parse().unwrap();
        if check_config(&config, T::DTYPE, m, k, n).is_err() {
            continue;
        }
        group.bench_function(BenchmarkId::new(format!("{}_s4d{dv}", T::DTYPE), name), |bench| {
            bench
                .iter_custom(|iters| event_time(gpu, iters, || spmm(gpu, &a_dev, &b_dev, &mut c_dev, &config)).unwrap())
        });
    }
    add_selected_and_baselines(group, gpu, name, &a_dev, &b_dev, &a);
}

/// New values of A, then the product ([`new_values_case`]), in f32 and f16.
fn new_values(c: &mut Criterion) {
    let Some(gpu) = gpu_or_skip("spmm_new_values") else { return };
    let problems = [
        // The shape of a pruned MiniLM FFN weight (../shared/matrices) at 70%, a batch of 1024 tokens.
        ("uniform_1536x384_s70_n1024", 1536, 384, 0.3, 1024),
        ("uniform_4096_s80_n256", 4096, 4096, 0.2, 256),
        ("uniform_8192x2048_s90_n128", 8192, 2048, 0.1, 128),
    ];
    let mut group = group(c, "spmm_new_values");
    for (name, m, k, density, n) in problems {
        let a = gen::uniform_random(m, k, density, 1);
        group.throughput(Throughput::Elements(2 * a.nnz() as u64 * n as u64));
        new_values_case::<f32>(&mut group, &gpu, name, &a, n);
        new_values_case::<half::f16>(&mut group, &gpu, name, &a, n);
    }
    group.finish();
}

fn new_values_case<T: Scalar>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    name: &str,
    a32: &CsMat<f32>,
    n: usize,
) {
    let a: CsMat<T> = gen::convert(a32);
    let (m, k, tag) = (a.rows(), a.cols(), T::DTYPE);
    let b: Vec<T> = gen::dense_matrix(k, n, 2).into_iter().map(T::from_f32).collect();
    let b_dev = DeviceDense::upload(gpu, k, n, &b).unwrap();
    let mut c_dev = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
    let mut a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    // Two sets of values taken in turn, so every update changes them.
    let other: Vec<T> = gen::dense_matrix(1, a.nnz(), 3).into_iter().map(T::from_f32).collect();
    let values = [gpu.stream().clone_htod(a.data()).unwrap(), gpu.stream().clone_htod(&other).unwrap()];
    let kernel = spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).unwrap();
    eprintln!("spmm_new_values {tag} {name}: {kernel}");
    group.bench_function(BenchmarkId::new(format!("{tag}_spmm"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).map(drop)).unwrap()
        })
    });
    let mut turn = 0;
    group.bench_function(BenchmarkId::new(format!("{tag}_set_values"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || {
                turn ^= 1;
                a_dev.set_values_from_device(gpu, &values[turn])
            })
            .unwrap()
        })
    });
    group.bench_function(BenchmarkId::new(format!("{tag}_set_values_then_spmm"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || {
                turn ^= 1;
                a_dev.set_values_from_device(gpu, &values[turn])?;
                spmm_auto(gpu, &a_dev, &b_dev, &mut c_dev).map(drop)
            })
            .unwrap()
        })
    });
    add_cusparse(group, gpu, name, &a_dev, &b_dev);
    // The kernel tuned for values that change before every product, with only its blocks kept.
    let opts = TuneOptions { values_change: true, ..TuneOptions::default() };
    let tuned = spmm_tune(gpu, &a_dev, &b_dev, &mut c_dev, &opts).unwrap();
    eprintln!(
        "spmm_new_values {tag} {name}: tuned for changing values {} ({:.4} ms), automatic {} ({:.4} ms)",
        tuned.kernel, tuned.ms, tuned.automatic, tuned.automatic_ms
    );
    a_dev.keep_tensor_core_blocks_of(&tuned.kernel);
    group.bench_function(BenchmarkId::new(format!("{tag}_set_values_then_tuned"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || {
                turn ^= 1;
                a_dev.set_values_from_device(gpu, &values[turn])?;
                spmm_kernel(gpu, &a_dev, &b_dev, &mut c_dev, &tuned.kernel).map(drop)
            })
            .unwrap()
        })
    });
    // The same written in place (`DeviceCsr::update_values`): the caller's writer, which here writes nothing (its
    // own time is not the library's, as it is not cuSPARSE's), then the blocks' rewrite and the product.
    group.bench_function(BenchmarkId::new(format!("{tag}_in_place_then_tuned"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || {
                a_dev.update_values(gpu, |_| Ok::<_, tilesparse::Error>(()))?;
                spmm_kernel(gpu, &a_dev, &b_dev, &mut c_dev, &tuned.kernel).map(drop)
            })
            .unwrap()
        })
    });
    let mut held = Some(a_dev);
    group.bench_function(BenchmarkId::new(format!("{tag}_rebuild_then_spmm_wall"), name), |bench| {
        bench.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                turn ^= 1;
                let (offsets, columns, mut old) = held.take().unwrap().into_parts();
                gpu.stream().memcpy_dtod(&values[turn], &mut old).unwrap();
                let rebuilt = DeviceCsr::from_device(gpu, m, k, offsets, columns, old).unwrap();
                spmm_auto(gpu, &rebuilt, &b_dev, &mut c_dev).unwrap();
                held = Some(rebuilt);
            }
            gpu.synchronize().unwrap();
            start.elapsed()
        })
    });
}

/// A problem of a group run in f32 and f16: its name, A, and n.
type Problem = (&'static str, CsMat<f32>, usize);

/// One of a group's cases: a problem in one type.
type Case = fn(&mut BenchmarkGroup<'_, WallTime>, &Gpu, &str, &CsMat<f32>, usize);

/// The group `name` over `problems` (made only where there is a GPU), each in f32 and in f16 (`cases`), with 1 s of
/// measurement per entry and FLOP/s as its throughput.
fn f32_and_f16_group(c: &mut Criterion, name: &str, problems: impl FnOnce() -> Vec<Problem>, cases: [Case; 2]) {
    let Some(gpu) = gpu_or_skip(name) else { return };
    let problems = problems();
    let mut group = group(c, name);
    group.measurement_time(Duration::from_secs(1));
    for (problem, a, n) in &problems {
        group.throughput(Throughput::Elements(2 * a.nnz() as u64 * *n as u64));
        for case in cases {
            case(&mut group, &gpu, problem, a, *n);
        }
    }
    group.finish();
}

fn transposed(c: &mut Criterion) {
    let problems = || {
        vec![
            // The backward pass of a pruned MiniLM FFN weight (1536 x 384 at 70%) over a batch of 1024 tokens.
            ("uniform_1536x384_s70_n1024", gen::uniform_random(1536, 384, 0.3, 1), 1024),
            ("uniform_4096_s80_n256", gen::uniform_random(4096, 4096, 0.2, 1), 256),
            ("uniform_8192x2048_s90_n128", gen::uniform_random(8192, 2048, 0.1, 1), 128),
            // Skewed columns: A^T's rows are as uneven as A's column counts.
            ("power_law_64K_n64", gen::power_law(1 << 16, 1 << 16, 8.0, 1.5, 1), 64),
        ]
    };
    f32_and_f16_group(c, "spmm_transposed", problems, [transposed_case::<f32>, transposed_case::<half::f16>]);
}

fn transposed_case<T: Scalar>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    name: &str,
    a32: &CsMat<f32>,
    n: usize,
) {
    let a: CsMat<T> = gen::convert(a32);
    let (m, k, tag) = (a.rows(), a.cols(), T::DTYPE);
    // C (k x n) = A^T (k x m) B (m x n).
    let b: Vec<T> = gen::dense_matrix(m, n, 2).into_iter().map(T::from_f32).collect();
    let b_dev = DeviceDense::upload(gpu, m, n, &b).unwrap();
    let mut c_dev = DeviceDense::<T>::zeros(gpu, k, n).unwrap();
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let mut at = a_dev.transpose(gpu).unwrap();
    let kernel = spmm_auto(gpu, at.matrix(), &b_dev, &mut c_dev).unwrap();
    eprintln!("spmm_transposed {tag} {name}: A^T {k} x {m}, {kernel}");
    group.bench_function(BenchmarkId::new(format!("{tag}_ours"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || spmm_auto(gpu, at.matrix(), &b_dev, &mut c_dev).map(drop)).unwrap()
        })
    });
    group.bench_function(BenchmarkId::new(format!("{tag}_refresh_then_ours"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || {
                at.refresh(gpu, &a_dev)?;
                spmm_auto(gpu, at.matrix(), &b_dev, &mut c_dev).map(drop)
            })
            .unwrap()
        })
    });
    let lib = Cusparse::new(gpu).unwrap();
    for alg in SpmmAlg::ALL {
        let mut c = DeviceDense::<T>::zeros(gpu, k, n).unwrap();
        let Ok(mut op) = CusparseSpmm::new_transposed(gpu, &lib, &a_dev, &b_dev, &mut c, alg) else {
            eprintln!("spmm_transposed {tag} {name}: cuSPARSE {} does not take A transposed", alg.name());
            continue;
        };
        group.bench_function(BenchmarkId::new(format!("{tag}_cusparse_transposed_{}", alg.name()), name), |bench| {
            bench.iter_custom(|iters| event_time(gpu, iters, || op.run(gpu)).unwrap())
        });
    }
    if tag != DType::F32 {
        return;
    }
    // The transpositions (f32; ours moves the values as bits, so the type only sets their size).
    group.bench_function(BenchmarkId::new("transpose_wall", name), |bench| {
        bench.iter_custom(|iters| {
            gpu.synchronize().unwrap();
            let start = Instant::now();
            for _ in 0..iters {
                drop(a_dev.transpose(gpu).unwrap());
            }
            gpu.synchronize().unwrap();
            start.elapsed()
        })
    });
    let mut conversion = CusparseCsr2Csc::new(gpu, &lib, &a_dev).unwrap();
    group.bench_function(BenchmarkId::new("cusparse_csr2csc", name), |bench| {
        bench.iter_custom(|iters| event_time(gpu, iters, || conversion.run(gpu)).unwrap())
    });
}

fn layouts(c: &mut Criterion) {
    let problems = || {
        vec![
            // Y = X W^T for a pruned MiniLM FFN weight (1536 x 384 at 70%) over 1024 tokens: B = X, C = Y.
            ("uniform_1536x384_s70_n1024", gen::uniform_random(1536, 384, 0.3, 1), 1024),
            ("uniform_4096_s90_n256", gen::uniform_random(4096, 4096, 0.1, 1), 256),
            // B and C of 32 MB each in f32.
            ("power_law_64K_n128", gen::power_law(1 << 16, 1 << 16, 8.0, 1.5, 1), 128),
        ]
    };
    f32_and_f16_group(c, "spmm_layouts", problems, [layouts_case::<f32>, layouts_case::<half::f16>]);
}

fn layouts_case<T: Scalar>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    name: &str,
    a32: &CsMat<f32>,
    n: usize,
) {
    use tilesparse::{spmm_layouts, DenseLayouts};
    let a: CsMat<T> = gen::convert(a32);
    let (m, k, tag) = (a.rows(), a.cols(), T::DTYPE);
    let b: Vec<T> = gen::dense_matrix(k, n, 2).into_iter().map(T::from_f32).collect();
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_rows = DeviceDense::upload(gpu, k, n, &b).unwrap();
    let b_cols = b_rows.transpose(gpu).unwrap();
    let mut c_rows = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
    let mut c_cols = DeviceDense::<T>::zeros(gpu, n, m).unwrap();
    let kernel = spmm_auto(gpu, &a_dev, &b_rows, &mut c_rows).unwrap();
    eprintln!("spmm_layouts {tag} {name}: {m} x {k}, n = {n}, {kernel}");
    group.bench_function(BenchmarkId::new(format!("{tag}_ours_row_major"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || spmm_kernel(gpu, &a_dev, &b_rows, &mut c_rows, &kernel)).unwrap()
        })
    });
    let layouts = DenseLayouts::COL_MAJOR;
    group.bench_function(BenchmarkId::new(format!("{tag}_ours_col_major"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || {
                spmm_layouts(gpu, &a_dev, &b_cols, &mut c_cols, layouts, Some(&kernel), Default::default()).map(drop)
            })
            .unwrap()
        })
    });
    let mut b_back = DeviceDense::<T>::zeros(gpu, k, n).unwrap();
    group.bench_function(BenchmarkId::new(format!("{tag}_transpose_b"), name), |bench| {
        bench.iter_custom(|iters| event_time(gpu, iters, || b_cols.transpose_into(gpu, &mut b_back)).unwrap())
    });
    let mut copy = gpu.stream().alloc_zeros::<T>(k * n).unwrap();
    group.bench_function(BenchmarkId::new(format!("{tag}_copy_b"), name), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || {
                let r = gpu.stream().memcpy_dtod(b_cols.as_slice(), &mut copy);
                r.map_err(|source| tilesparse::Error::Driver { what: "copying B", source })
            })
            .unwrap()
        })
    });
    let lib = Cusparse::new(gpu).unwrap();
    for alg in SpmmAlg::ALL {
        let mut c = DeviceDense::<T>::zeros(gpu, n, m).unwrap();
        let Ok(mut op) = CusparseSpmm::new_with_layouts(gpu, &lib, &a_dev, &b_cols, &mut c, alg, layouts) else {
            eprintln!("spmm_layouts {tag} {name}: cuSPARSE {} does not take B and C column-major", alg.name());
            continue;
        };
        group.bench_function(BenchmarkId::new(format!("{tag}_cusparse_col_major_{}", alg.name()), name), |bench| {
            bench.iter_custom(|iters| event_time(gpu, iters, || op.run(gpu)).unwrap())
        });
    }
}

/// A step's products recorded once and replayed (`Gpu::record`), against the same products issued one by one, ours
/// and cuSPARSE's: four pruned weights at 90% over one activation X of 768 x n (three 768 x 768 projections, plain,
/// and a 3072 x 768 FFN weight with bias + ReLU, cuSPARSE's followed by the pass) at a small and a mid-sized batch.
fn recorded(c: &mut Criterion) {
    let Some(gpu) = gpu_or_skip("spmm_recorded") else { return };
    let mut group = group(c, "spmm_recorded");
    group.measurement_time(Duration::from_secs(1));
    let weights = [
        gen::uniform_random(768, 768, 0.1, 1),
        gen::uniform_random(768, 768, 0.1, 2),
        gen::uniform_random(768, 768, 0.1, 3),
        gen::uniform_random(3072, 768, 0.1, 4),
    ];
    for n in [16, 128] {
        let flop: usize = weights.iter().map(|w| 2 * w.nnz() * n).sum();
        group.throughput(Throughput::Elements(flop as u64));
        recorded_case::<f32>(&mut group, &gpu, &weights, n);
        recorded_case::<half::f16>(&mut group, &gpu, &weights, n);
    }
    group.finish();
}

/// Wall-clock time of `iters` calls of `f`, from an idle stream to the end of the work they queued.
fn wall_time(gpu: &Gpu, iters: u64, mut f: impl FnMut() -> tilesparse::Result<()>) -> Duration {
    gpu.synchronize().unwrap();
    let start = Instant::now();
    for _ in 0..iters {
        f().unwrap();
    }
    gpu.synchronize().unwrap();
    start.elapsed()
}

/// The host's time to issue `iters` calls of `f`, none of them waiting for the device: in chunks of 64, each queued
/// behind a hold of the stream longer than its issue takes, synchronised after (untimed).
fn issue_time(gpu: &Gpu, iters: u64, mut f: impl FnMut() -> tilesparse::Result<()>) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let chunk = left.min(64);
        gpu.hold_stream(Duration::from_micros(200 * chunk)).unwrap();
        let start = Instant::now();
        for _ in 0..chunk {
            f().unwrap();
        }
        total += start.elapsed();
        gpu.synchronize().unwrap();
        left -= chunk;
    }
    total
}

fn recorded_case<T: Scalar>(group: &mut BenchmarkGroup<'_, WallTime>, gpu: &Gpu, weights: &[CsMat<f32>], n: usize) {
    use tilesparse::{spmm::upload_bias, spmm_auto_with, spmm_concurrent, SpmmEpilogue, SpmmJob};
    let (tag, name, k) = (T::DTYPE, format!("qkv_up_768_s90_n{n}"), weights[0].cols());
    let a: Vec<DeviceCsr<T>> =
        weights.iter().map(|w| DeviceCsr::upload(gpu, gen::convert::<T>(w).view()).unwrap()).collect();
    let x_host: Vec<T> = gen::dense_matrix(k, n, 5).into_iter().map(T::from_f32).collect();
    let x = DeviceDense::upload(gpu, k, n, &x_host).unwrap();
    let zeros = || -> Vec<DeviceDense<T>> { a.iter().map(|a| DeviceDense::zeros(gpu, a.rows(), n).unwrap()).collect() };
    let mut outs = zeros();
    let last = a.len() - 1;
    let bias = upload_bias(gpu, &gen::dense_matrix(a[last].rows(), 1, 6)).unwrap();
    let forward = |g: &Gpu, outs: &mut [DeviceDense<T>]| -> tilesparse::Result<()> {
        for (i, (a, c)) in a.iter().zip(outs.iter_mut()).enumerate() {
            let epilogue = if i == last { SpmmEpilogue::bias_relu(&bias) } else { SpmmEpilogue::default() };
            spmm_auto_with(g, a, &x, c, epilogue)?;
        }
        Ok(())
    };
    // The first run builds what the products keep; then the step is recorded.
    forward(gpu, &mut outs).unwrap();
    let (recording, ()) = gpu.record(|g| forward(g, &mut outs)).unwrap();
    let id = |what: &str| BenchmarkId::new(format!("{tag}_{what}"), &name);
    group.bench_function(id("ours_issued_wall"), |bench| {
        bench.iter_custom(|iters| wall_time(gpu, iters, || forward(gpu, &mut outs)))
    });
    // SAFETY (each replay below): the recording's buffers (A's, X, the outputs, the bias) outlive it.
    group.bench_function(id("ours_recorded_wall"), |bench| {
        bench.iter_custom(|iters| wall_time(gpu, iters, || unsafe { recording.replay(gpu) }))
    });
    group.bench_function(id("ours_issued_host"), |bench| {
        bench.iter_custom(|iters| issue_time(gpu, iters, || forward(gpu, &mut outs)))
    });
    group.bench_function(id("ours_recorded_host"), |bench| {
        bench.iter_custom(|iters| issue_time(gpu, iters, || unsafe { recording.replay(gpu) }))
    });
    group.bench_function(id("ours_issued_device"), |bench| {
        bench.iter_custom(|iters| event_time(gpu, iters, || forward(gpu, &mut outs)).unwrap())
    });
    group.bench_function(id("ours_recorded_device"), |bench| {
        bench.iter_custom(|iters| event_time(gpu, iters, || unsafe { recording.replay(gpu) }).unwrap())
    });
    // The four side by side (`spmm_concurrent`), issued and recorded.
    let concurrent = |g: &Gpu, outs: &mut [DeviceDense<T>]| -> tilesparse::Result<()> {
        let mut jobs: Vec<SpmmJob<T>> = a
            .iter()
            .zip(outs.iter_mut())
            .enumerate()
            .map(|(i, (a, c))| SpmmJob {
                epilogue: if i == last { SpmmEpilogue::bias_relu(&bias) } else { SpmmEpilogue::default() },
                ..SpmmJob::new(a, &x, c)
            })
            .collect();
        spmm_concurrent(g, &mut jobs).map(drop)
    };
    concurrent(gpu, &mut outs).unwrap();
    let (side_by_side, ()) = gpu.record(|g| concurrent(g, &mut outs)).unwrap();
    group.bench_function(id("ours_concurrent_issued_wall"), |bench| {
        bench.iter_custom(|iters| wall_time(gpu, iters, || concurrent(gpu, &mut outs)))
    });
    group.bench_function(id("ours_concurrent_recorded_wall"), |bench| {
        bench.iter_custom(|iters| wall_time(gpu, iters, || unsafe { side_by_side.replay(gpu) }))
    });
    group.bench_function(id("ours_concurrent_recorded_device"), |bench| {
        bench.iter_custom(|iters| event_time(gpu, iters, || unsafe { side_by_side.replay(gpu) }).unwrap())
    });
    let lib = Cusparse::new(gpu).unwrap();
    // cuSPARSE side by side: the three projections on handles of their own streams, the FFN weight (and the pass
    // after it) on the handle's stream, ordered by events as a cuSPARSE user would.
    let streams: Vec<_> = (0..last).map(|_| gpu.context().new_stream().unwrap()).collect();
    let side_libs: Vec<Cusparse> = streams.iter().map(|s| Cusparse::on_stream(gpu, s).unwrap()).collect();
    for alg in SpmmAlg::ALL {
        let mut outs = zeros();
        let libs = side_libs.iter().chain([&lib]);
        let ops: tilesparse::Result<Vec<CusparseSpmm>> = a
            .iter()
            .zip(outs.iter_mut())
            .zip(libs)
            .map(|((a, c), lib)| CusparseSpmm::new(gpu, lib, a, &x, c, alg))
            .collect();
        let Ok(mut ops) = ops else { continue };
        let side_by_side = |g: &Gpu, ops: &mut [CusparseSpmm]| -> tilesparse::Result<()> {
            let driver = |what| move |source| tilesparse::Error::Driver { what, source };
            let fork = g.stream().record_event(None).map_err(driver("recording the fork"))?;
            for s in &streams {
                s.wait(&fork).map_err(driver("waiting for the fork"))?;
            }
            for op in ops[..last].iter_mut() {
                op.run(g)?;
            }
            ops[last].run_bias_relu(g, &bias)?;
            for s in &streams {
                let done = s.record_event(None).map_err(driver("recording the join"))?;
                g.stream().wait(&done).map_err(driver("waiting for the join"))?;
            }
            Ok(())
        };
        let label = format!("cusparse_{}_streams", alg.name());
        issued_and_recorded(group, gpu, &id, &label, |g| side_by_side(g, &mut ops));
    }
    for alg in SpmmAlg::ALL {
        let mut outs = zeros();
        let ops: tilesparse::Result<Vec<CusparseSpmm>> =
            a.iter().zip(outs.iter_mut()).map(|(a, c)| CusparseSpmm::new(gpu, &lib, a, &x, c, alg)).collect();
        let Ok(mut ops) = ops else {
            eprintln!("spmm_recorded {tag} {name}: cuSPARSE {} does not take these products", alg.name());
            continue;
        };
        let forward = |g: &Gpu, ops: &mut [CusparseSpmm]| -> tilesparse::Result<()> {
            for (i, op) in ops.iter_mut().enumerate() {
                if i == last {
                    op.run_bias_relu(g, &bias)?;
                } else {
                    op.run(g)?;
                }
            }
            Ok(())
        };
        issued_and_recorded(group, gpu, &id, &format!("cusparse_{}", alg.name()), |g| forward(g, &mut ops));
    }
}

/// `step` (run once first) in wall-clock time issued call by call (`{label}_issued_wall`) and, where it can be
/// recorded, replayed (`{label}_recorded_wall`).
fn issued_and_recorded(
    group: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    id: &dyn Fn(&str) -> BenchmarkId,
    label: &str,
    mut step: impl FnMut(&Gpu) -> tilesparse::Result<()>,
) {
    step(gpu).unwrap();
    group.bench_function(id(&format!("{label}_issued_wall")), |bench| {
        bench.iter_custom(|iters| wall_time(gpu, iters, || step(gpu)))
    });
    match gpu.record(&mut step) {
        Ok((recording, ())) => {
            group.bench_function(id(&format!("{label}_recorded_wall")), |bench| {
                // SAFETY: the step's buffers belong to the caller, alive until after this returns.
                bench.iter_custom(|iters| wall_time(gpu, iters, || unsafe { recording.replay(gpu) }))
            });
        }
        Err(e) => eprintln!("spmm_recorded: {label} cannot be recorded: {e}"),
    }
}

/// [`DeviceCsr::upload`] and [`DeviceCsr::from_device`] of large matrices, and [`DeviceDense::download`] of a
/// large C, against the bare copies (wall time).
fn transfers(c: &mut Criterion) {
    let Some(gpu) = gpu_or_skip("spmm_transfers") else { return };
    let problems = [
        ("uniform_4096_s50", gen::uniform_random(4096, 4096, 0.5, 1)),
        ("uniform_8192x2048_s80", gen::uniform_random(8192, 2048, 0.2, 1)),
        ("power_law_1M", gen::power_law(1 << 20, 1 << 20, 8.0, 1.5, 1)),
    ];
    let mut group = group(c, "spmm_transfers");
    let wall = |gpu: &Gpu, iters: u64, mut f: Box<dyn FnMut() + '_>| {
        wall_time(gpu, iters, || {
            f();
            Ok(())
        })
    };
    for (name, a) in problems {
        group.throughput(Throughput::Elements(a.nnz() as u64));
        let (m, k) = (a.rows(), a.cols());
        group.bench_function(BenchmarkId::new("upload", name), |bench| {
            bench.iter_custom(|iters| wall(&gpu, iters, Box::new(|| drop(DeviceCsr::upload(&gpu, a.view()).unwrap()))))
        });
        let offsets: Vec<i32> = a.indptr().to_proper().iter().map(|&x| x as i32).collect();
        let columns: Vec<i32> = a.indices().iter().map(|&x| x as i32).collect();
        let mut bare_copies = || {
            let s = gpu.stream();
            drop((s.clone_htod(&offsets).unwrap(), s.clone_htod(&columns).unwrap()));
            drop(s.clone_htod(a.data()).unwrap());
        };
        group.bench_function(BenchmarkId::new("bare_copies", name), |bench| {
            bench.iter_custom(|iters| wall(&gpu, iters, Box::new(&mut bare_copies)))
        });
        let mut held = Some(DeviceCsr::upload(&gpu, a.view()).unwrap().into_parts());
        let mut wrap_again = || {
            let (o, c, v) = held.take().unwrap();
            held = Some(DeviceCsr::from_device(&gpu, m, k, o, c, v).unwrap().into_parts());
        };
        group.bench_function(BenchmarkId::new("from_device", name), |bench| {
            bench.iter_custom(|iters| wall(&gpu, iters, Box::new(&mut wrap_again)))
        });
    }
    let (m, n) = (4096, 4096);
    let c_dev = DeviceDense::upload(&gpu, m, n, &gen::dense_matrix(m, n, 3)).unwrap();
    group.throughput(Throughput::Bytes((m * n * 4) as u64));
    group.bench_function(BenchmarkId::new("download", "c_4096x4096_f32"), |bench| {
        bench.iter_custom(|iters| wall(&gpu, iters, Box::new(|| drop(c_dev.download(&gpu).unwrap()))))
    });
    // What `download` was before step 105, and what cudarc's own download costs: a fresh vector, its pages faulted
    // in by the driver's copy.
    group.bench_function(BenchmarkId::new("cudarc_clone_dtoh", "c_4096x4096_f32"), |bench| {
        bench.iter_custom(|iters| {
            wall(&gpu, iters, Box::new(|| drop(gpu.stream().clone_dtoh(c_dev.as_slice()).unwrap())))
        })
    });
    let mut touched = vec![0f32; m * n];
    group.bench_function(BenchmarkId::new("download_into", "c_4096x4096_f32"), |bench| {
        bench.iter_custom(|iters| wall(&gpu, iters, Box::new(|| c_dev.download_into(&gpu, &mut touched).unwrap())))
    });
    group.finish();
}

criterion_group!(benches, vector_widths, half_vector_widths, new_values, transposed, layouts, recorded, transfers);
criterion_main!(benches);

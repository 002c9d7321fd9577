//! Criterion groups `spmm_vector_widths` (scalar vs float2 vs float4) and `spmm_half_vector_widths` (half2 vs
//! half4 vs half8, f16 and bf16) on the same problems, with the selected config, cuSPARSE (each CSR algorithm)
//! and cuBLAS GEMM in the same group, so every figure is a ratio from one run.
//! Time is CUDA-event time (`iter_custom`); throughput is reported as FLOP/s (2 * nnz * n "elements").

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use sprs::CsMat;
use tilesparse::baseline::cublas::Cublas;
use tilesparse::baseline::cusparse::{Cusparse, CusparseSpmm, SpmmAlg};
use tilesparse::spmm::check_config;
use tilesparse::timing::event_time;
use tilesparse::{gen, spmm, DType, DeviceCsr, DeviceDense, Gpu, Scalar, SpmmConfig};

fn vector_widths(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) if tilesparse::kernels::KERNELS_BUILT => g,
        Ok(_) => return eprintln!("SKIP spmm_vector_widths: this build has no kernels"),
        Err(e) => return eprintln!("SKIP spmm_vector_widths: no GPU ({e})"),
    };
    let problems = [
        ("uniform_4096_s90_n256", 4096, 4096, 0.1, 256),
        ("uniform_8192x2048_s80_n128", 8192, 2048, 0.2, 128),
        ("uniform_4096_s50_n128", 4096, 4096, 0.5, 128),
    ];
    let mut group = c.benchmark_group("spmm_vector_widths");
    group.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
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
    let lib = Cusparse::new(gpu).unwrap();
    for alg in SpmmAlg::ALL {
        let mut c2 = DeviceDense::<T>::zeros(gpu, m, n).unwrap();
        let Ok(mut op) = CusparseSpmm::new(gpu, &lib, a_dev, b_dev, &mut c2, alg) else { continue };
        group.bench_function(BenchmarkId::new(format!("{tag}_cusparse_{}", alg.name()), name), |bench| {
            bench.iter_custom(|iters| event_time(gpu, iters, || op.run(gpu)).unwrap())
        });
    }
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

/// half2 vs half4 vs half8 dense vectors (f16 and bf16, float4-wide sparse loads), with the baselines.
fn half_vector_widths(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) if tilesparse::kernels::KERNELS_BUILT => g,
        Ok(_) => return eprintln!("SKIP spmm_half_vector_widths: this build has no kernels"),
        Err(e) => return eprintln!("SKIP spmm_half_vector_widths: no GPU ({e})"),
    };
    let mut group = c.benchmark_group("spmm_half_vector_widths");
    group.sample_size(20).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
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

criterion_group!(benches, vector_widths, half_vector_widths);
criterion_main!(benches);

//! Criterion group `spmm_vector_widths`: scalar vs float2 vs float4 SpMM on the same problems, with cuSPARSE
//! (each CSR algorithm) and cuBLAS SGEMM in the same group, so every figure is a ratio from one run.
//! Time is CUDA-event time (`iter_custom`); throughput is reported as FLOP/s (2 * nnz * n "elements").

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tilesparse::baseline::cublas::Cublas;
use tilesparse::baseline::cusparse::{Cusparse, CusparseSpmm, SpmmAlg};
use tilesparse::spmm::check_config;
use tilesparse::timing::event_time;
use tilesparse::{gen, spmm, DType, DeviceCsr, DeviceDense, Gpu, SpmmConfig};

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
        let selected = SpmmConfig::select_with_stats(m, k, n, a_dev.stats(), DType::F32);
        group.bench_function(BenchmarkId::new("selected", name), |bench| {
            bench.iter_custom(|iters| {
                event_time(&gpu, iters, || spmm(&gpu, &a_dev, &b_dev, &mut c_dev, &selected)).unwrap()
            })
        });
        let lib = Cusparse::new(&gpu).unwrap();
        for alg in SpmmAlg::ALL {
            let mut c2 = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
            let Ok(mut op) = CusparseSpmm::new(&gpu, &lib, &a_dev, &b_dev, &mut c2, alg) else { continue };
            group.bench_function(BenchmarkId::new(format!("cusparse_{}", alg.name()), name), |bench| {
                bench.iter_custom(|iters| event_time(&gpu, iters, || op.run(&gpu)).unwrap())
            });
        }
        if let Ok(blas) = Cublas::new(&gpu) {
            let a_dense = gpu.stream().clone_htod(&tilesparse::suite::densify(&a)).unwrap();
            let mut c3 = DeviceDense::<f32>::zeros(&gpu, m, n).unwrap();
            group.bench_function(BenchmarkId::new("cublas_sgemm", name), |bench| {
                bench.iter_custom(|iters| {
                    event_time(&gpu, iters, || blas.gemm_row_major(&gpu, &a_dense, &b_dev, &mut c3)).unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, vector_widths);
criterion_main!(benches);

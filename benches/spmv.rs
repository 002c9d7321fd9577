//! Criterion group `spmv_seed`: the seed prefix-sum SpMV, CUDA-event time, throughput in bytes of compulsory
//! traffic (values + indices + row pointers + x + y once).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tilesparse::spmv::SeedSpmvWorkspace;
use tilesparse::timing::event_time;
use tilesparse::{gen, spmv_seed, DeviceCsr, Gpu};

fn seed(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) if tilesparse::kernels::KERNELS_BUILT => g,
        Ok(_) => return eprintln!("SKIP spmv_seed: this build has no kernels"),
        Err(e) => return eprintln!("SKIP spmv_seed: no GPU ({e})"),
    };
    let mut group = c.benchmark_group("spmv_seed");
    group.sample_size(20).measurement_time(Duration::from_secs(2));
    for (name, a) in [
        ("uniform_1M_16", gen::uniform_random(1 << 20, 1 << 20, 16.0 / (1 << 20) as f64, 1)),
        ("powerlaw_1M_8", gen::power_law(1 << 20, 1 << 20, 8.0, 1.5, 2)),
    ] {
        let (m, k) = (a.rows(), a.cols());
        let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
        let x = gpu.stream().clone_htod(&gen::dense_matrix(k, 1, 3)).unwrap();
        let mut y = gpu.stream().alloc_zeros::<f32>(m).unwrap();
        let mut ws = SeedSpmvWorkspace::new(&gpu, a.nnz()).unwrap();
        group.throughput(Throughput::Bytes((a.nnz() * 8 + (m + 1) * 4 + k * 4 + m * 4) as u64));
        group.bench_function(BenchmarkId::new("seed", name), |bench| {
            bench.iter_custom(|iters| {
                event_time(&gpu, iters, || spmv_seed(&gpu, &a_dev, &x, 1.0, 0.0, &mut y, &mut ws)).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, seed);
criterion_main!(benches);

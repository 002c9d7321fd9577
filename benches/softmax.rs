//! Criterion group `softmax`: the sparse softmax and its gradient (the automatic configs) on an attention mask (a local
//! window of 256 and 16 global tokens over 4096) and uniform 16384^2 at 90% (107 MB of f32 values, past the L2), in f32
//! and f16; CUDA-event time, throughput in bytes moved (the values read and written, and the row pointer).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use sprs::CsMat;
use tilesparse::suite_softmax::local_global_mask;
use tilesparse::timing::event_time;
use tilesparse::{gen, softmax_backward_with, softmax_with, DeviceCsr, Gpu, Scalar, SoftmaxConfig};

fn one<T: Scalar>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    gpu: &Gpu,
    name: &str,
    a: &CsMat<f32>,
) {
    let values: Vec<T> = gen::dense_matrix(a.nnz(), 1, 1).into_iter().map(|v| T::from_f32(8.0 * v)).collect();
    let scores = CsMat::new(a.shape(), a.indptr().to_proper().to_vec(), a.indices().to_vec(), values);
    let mut c = DeviceCsr::upload(gpu, scores.view()).unwrap();
    let p = DeviceCsr::upload(gpu, scores.view()).unwrap();
    let mut dp = DeviceCsr::upload(gpu, scores.view()).unwrap();
    let config = SoftmaxConfig::select(a.rows(), c.stats(gpu).unwrap(), T::DTYPE);
    let backward = SoftmaxConfig::select_backward(a.rows(), c.stats(gpu).unwrap(), T::DTYPE);
    let id = format!("{name}_{}", T::DTYPE);
    let row_pointer = 4 * (a.rows() as u64 + 1);
    group.throughput(Throughput::Bytes(2 * (a.nnz() * T::DTYPE.size()) as u64 + row_pointer));
    group.bench_function(BenchmarkId::new("forward", &id), |bench| {
        bench.iter_custom(|iters| event_time(gpu, iters, || softmax_with(gpu, &mut c, &config)).unwrap())
    });
    group.throughput(Throughput::Bytes(3 * (a.nnz() * T::DTYPE.size()) as u64 + row_pointer));
    group.bench_function(BenchmarkId::new("backward", &id), |bench| {
        bench
            .iter_custom(|iters| event_time(gpu, iters, || softmax_backward_with(gpu, &p, &mut dp, &backward)).unwrap())
    });
}

fn softmax_group(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) if tilesparse::kernels::KERNELS_BUILT => g,
        Ok(_) => return eprintln!("SKIP softmax: this build has no kernels"),
        Err(e) => return eprintln!("SKIP softmax: no GPU ({e})"),
    };
    let problems = [
        ("attention_s4096_w256_g16", local_global_mask(4096, 256, 16)),
        ("uniform_16384x16384_s90", gen::uniform_random(16384, 16384, 0.1, 42)),
    ];
    let mut group = c.benchmark_group("softmax");
    group.sample_size(20).measurement_time(Duration::from_secs(2));
    for (name, a) in &problems {
        one::<f32>(&mut group, &gpu, name, a);
        one::<f16>(&mut group, &gpu, name, a);
    }
    group.finish();
}

criterion_group!(benches, softmax_group);
criterion_main!(benches);

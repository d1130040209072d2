//! Per-service request metrics, rendered in the Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: &[f64] = &[
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0,
];

/// The bucket an observation of `seconds` counts in; none past the last.
fn bucket(seconds: f64) -> Option<usize> {
    BUCKETS.iter().position(|bound| seconds <= *bound)
}

#[derive(Default, Clone)]
struct Histogram {
    /// counts[i]: observations <= BUCKETS[i] and > BUCKETS[i-1].
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        if let Some(i) = bucket(seconds) {
            self.counts[i] += 1;
        }
        self.sum += seconds;
        self.count += 1;
    }

    /// The series of `name`, each with `labels` (none when empty).
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let comma = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, bound) in BUCKETS.iter().enumerate() {
            cumulative += self.counts.get(i).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{comma}le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{comma}le=\"+Inf\"}} {}",
            self.count
        );
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// A latency histogram observed without a lock, by one thread or many.
#[derive(Default)]
pub struct SharedHistogram {
    /// counts[i]: as [`Histogram`]'s.
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    nanos: AtomicU64,
}

impl SharedHistogram {
    pub fn observe(&self, elapsed: Duration) {
        if let Some(i) = bucket(elapsed.as_secs_f64()) {
            self.counts[i].fetch_add(1, Relaxed);
        }
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    /// As [`Histogram::render`]; an observation under way may show in a
    /// bucket before it shows in the count, which is then raised to the
    /// buckets' total so that the series stay cumulative.
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Relaxed)).collect();
        let count = self.count.load(Relaxed).max(counts.iter().sum());
        Histogram {
            counts,
            sum: self.nanos.load(Relaxed) as f64 / 1e9,
            count,
        }
        .render(out, name, labels);
    }
}

/// The requests of one operation.
#[derive(Default)]
struct Operation {
    /// Requests answered, by status.
    statuses: BTreeMap<u16, u64>,
    latency: Histogram,
}

#[derive(Default)]
struct Tables {
    /// By operation name; a name is allocated once, on its first request.
    operations: BTreeMap<String, Operation>,
    instantiation: Histogram,
    /// Socket calls by how they ended: `answered` (by the component, with
    /// whatever status), `unavailable` or `internal` (by the host).
    socket_calls: BTreeMap<&'static str, u64>,
    socket_latency: Histogram,
}

/// The metrics of one service.
pub struct Metrics {
    service: &'static str,
    tables: Mutex<Tables>,
    sockets_open: AtomicU64,
    sockets_total: AtomicU64,
    /// Socket connections closed because their client did not take a
    /// frame in time (`--socket-reply-timeout-ms`).
    sockets_not_reading: AtomicU64,
}

impl Metrics {
    pub fn new(service: &'static str) -> Self {
        Metrics {
            service,
            tables: Mutex::default(),
            sockets_open: AtomicU64::new(0),
            sockets_total: AtomicU64::new(0),
            sockets_not_reading: AtomicU64::new(0),
        }
    }

    /// One socket call finished, `ended` as [`Tables::socket_calls`] names.
    pub fn observe_socket_call(&self, ended: &'static str, elapsed: Duration) {
        let mut tables = self.tables.lock().unwrap();
        *tables.socket_calls.entry(ended).or_default() += 1;
        tables.socket_latency.observe(elapsed.as_secs_f64());
    }

    /// A socket connection opened; it counts as open until `socket_closed`.
    pub fn socket_opened(&self) {
        self.sockets_total.fetch_add(1, Relaxed);
        self.sockets_open.fetch_add(1, Relaxed);
    }

    pub fn socket_closed(&self) {
        self.sockets_open.fetch_sub(1, Relaxed);
    }

    /// A socket connection closed because its client took no frame in time.
    pub fn socket_not_reading(&self) {
        self.sockets_not_reading.fetch_add(1, Relaxed);
    }

    /// One finished request; `operation` is `none` for router failures.
    pub fn observe_request(&self, operation: &str, status: u16, elapsed: Duration) {
        let mut tables = self.tables.lock().unwrap();
        let operations = &mut tables.operations;
        if !operations.contains_key(operation) {
            operations.insert(operation.to_string(), Operation::default());
        }
        let Some(counted) = operations.get_mut(operation) else {
            return;
        };
        *counted.statuses.entry(status).or_default() += 1;
        counted.latency.observe(elapsed.as_secs_f64());
    }

    /// One component instantiation.
    pub fn observe_instantiation(&self, elapsed: Duration) {
        self.tables
            .lock()
            .unwrap()
            .instantiation
            .observe(elapsed.as_secs_f64());
    }

    /// The text exposition, with `digest` as the loaded component.
    pub fn render(&self, digest: &str) -> String {
        let tables = self.tables.lock().unwrap();
        let service = self.service;
        let mut out = String::new();
        out.push_str("# HELP lab_requests_total Requests answered, by operation and status.\n");
        out.push_str("# TYPE lab_requests_total counter\n");
        for (operation, counted) in &tables.operations {
            for (status, count) in &counted.statuses {
                let _ = writeln!(
                    out,
                    "lab_requests_total{{service=\"{service}\",operation=\"{operation}\",status=\"{status}\"}} {count}"
                );
            }
        }
        out.push_str(
            "# HELP lab_request_duration_seconds Time from request head to response head.\n",
        );
        out.push_str("# TYPE lab_request_duration_seconds histogram\n");
        for (operation, counted) in &tables.operations {
            let labels = format!("service=\"{service}\",operation=\"{operation}\"");
            counted
                .latency
                .render(&mut out, "lab_request_duration_seconds", &labels);
        }
        out.push_str("# HELP lab_instantiation_duration_seconds Time to instantiate a component for one request.\n");
        out.push_str("# TYPE lab_instantiation_duration_seconds histogram\n");
        tables.instantiation.render(
            &mut out,
            "lab_instantiation_duration_seconds",
            &format!("service=\"{service}\""),
        );
        if self.sockets_total.load(Relaxed) > 0 {
            self.render_sockets(&tables, &mut out);
        }
        out.push_str("# HELP lab_component_info The component now loaded.\n");
        out.push_str("# TYPE lab_component_info gauge\n");
        let _ = writeln!(
            out,
            "lab_component_info{{service=\"{service}\",digest=\"{digest}\"}} 1"
        );
        out
    }
}

impl Metrics {
    fn render_sockets(&self, tables: &Tables, out: &mut String) {
        let service = self.service;
        let gauges = [
            (
                "lab_sockets_open",
                "gauge",
                "Socket connections open now.",
                &self.sockets_open,
            ),
            (
                "lab_sockets_total",
                "counter",
                "Socket connections opened.",
                &self.sockets_total,
            ),
            (
                "lab_sockets_not_reading_total",
                "counter",
                "Socket connections closed because their client took no frame in time.",
                &self.sockets_not_reading,
            ),
        ];
        for (name, kind, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            let _ = writeln!(
                out,
                "{name}{{service=\"{service}\"}} {}",
                value.load(Relaxed)
            );
        }
        out.push_str("# HELP lab_socket_calls_total Socket calls, by how they ended: answered by the component, or unavailable or internal in the host.\n");
        out.push_str("# TYPE lab_socket_calls_total counter\n");
        for (ended, count) in &tables.socket_calls {
            let _ = writeln!(
                out,
                "lab_socket_calls_total{{service=\"{service}\",ended=\"{ended}\"}} {count}"
            );
        }
        out.push_str("# HELP lab_socket_call_duration_seconds Time from a call's frame read to its reply made.\n");
        out.push_str("# TYPE lab_socket_call_duration_seconds histogram\n");
        tables.socket_latency.render(
            out,
            "lab_socket_call_duration_seconds",
            &format!("service=\"{service}\""),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let metrics = Metrics::new("bytes");
        metrics.observe_request("get", 200, Duration::from_micros(30));
        metrics.observe_request("get", 200, Duration::from_millis(3));
        metrics.observe_request("get", 404, Duration::from_micros(30));
        let text = metrics.render("sha256:00");
        assert!(text.contains(
            "lab_requests_total{service=\"bytes\",operation=\"get\",status=\"200\"} 2\n"
        ));
        assert!(text.contains(
            "lab_requests_total{service=\"bytes\",operation=\"get\",status=\"404\"} 1\n"
        ));
        assert!(text.contains(
            "lab_request_duration_seconds_bucket{service=\"bytes\",operation=\"get\",le=\"0.00005\"} 2\n"
        ));
        assert!(text.contains(
            "lab_request_duration_seconds_bucket{service=\"bytes\",operation=\"get\",le=\"+Inf\"} 3\n"
        ));
    }

    #[test]
    fn a_shared_histogram_renders_without_labels() {
        let histogram = SharedHistogram::default();
        histogram.observe(Duration::from_micros(200));
        histogram.observe(Duration::from_millis(7));
        histogram.observe(Duration::from_secs(11));
        let mut text = String::new();
        histogram.render(&mut text, "lab_x_seconds", "");
        assert!(
            text.contains("lab_x_seconds_bucket{le=\"0.0001\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("lab_x_seconds_bucket{le=\"0.00025\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("lab_x_seconds_bucket{le=\"0.01\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("lab_x_seconds_bucket{le=\"10\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("lab_x_seconds_bucket{le=\"+Inf\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("lab_x_seconds_sum{} 11.0072\n"), "{text}");
        assert!(text.contains("lab_x_seconds_count{} 3\n"), "{text}");
    }
}

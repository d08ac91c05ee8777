// sync-bench: StrataSync's push and pull throughput and its save-to-visible
// latency, against a throwaway PostgreSQL server (fsync on) over loopback.
//
//     swift run -c release sync-bench [--count N] [--batch B] [--samples S]
//
// Push: device A holds N small models saved in saves of B (not timed);
// one `syncNow()` pushes them, one server transaction per save. Pull: a
// new device B pulls them with one `syncNow()`. Latency: A and B run
// (`start()`, polling every minute, so only LISTEN/NOTIFY wakes B); A
// saves one model S times, and each sample is the time from A's `save()`
// returning to B's `didApplyRemoteChanges` for it.
//
//     swift run -c release sync-bench --external-only [--count N]
//
// External storage (issue 46): A holds N models (default 10,000) with a
// 100 KiB `.externalStorage` value each (bytes that do not compress),
// saved in saves of 100; A's push and B's pull are timed, in MB/s of
// values, each with the peak of the process's anonymous resident memory
// while it ran (RssAnon, sampled every 5 ms: the store's file pages the
// engine maps are page cache, not counted).
import BenchSupport
import Foundation
import Strata
import StrataSync
import StrataTesting

@Model
final class Reading {
    var sensor: String
    var value: Double
    var taken: Date

    init(sensor: String, value: Double, taken: Date) {
        self.sensor = sensor
        self.value = value
        self.taken = taken
    }
}

@Model
final class Scan {
    var label: String
    @Attribute(.externalStorage) var page: Data

    init(label: String, page: Data) {
        self.label = label
        self.page = page
    }
}

@Model
final class Project {
    var name: String
    @Relationship(deleteRule: .cascade, inverse: \ProjectTask.project) var tasks: [ProjectTask] = []

    init(name: String) { self.name = name }
}

@Model
final class ProjectTask {
    var title: String
    var done: Bool
    var project: Project?

    init(title: String, done: Bool) {
        self.title = title
        self.done = done
    }
}

let count = countArgument(default: 100_000)
let batch = argument("--batch").flatMap(Int.init) ?? 1_000
let samples = argument("--samples").flatMap(Int.init) ?? 200

let cluster = try PostgresCluster(durable: true)
let directory = TemporaryDirectory(prefix: "sync-bench")
defer {
    cluster.destroy()
    try? FileManager.default.removeItem(atPath: directory.path)
}
// The operator's install, once: devices create nothing on the server.
_ = try await SyncServer(url: cluster.url, password: cluster.password).install()

func device(_ name: String, zone: String) throws -> (ModelContainer, SyncEngine) {
    let url = URL(fileURLWithPath: directory.file(name + ".store"))
    let container = try ModelContainer(for: Reading.self, configurations: ModelConfiguration(url: url))
    let configuration = try SyncConfiguration(
        server: cluster.url, password: cluster.password, zone: zone, pollInterval: .seconds(60))
    return (container, try SyncEngine(container: container, configuration: configuration))
}

// Tasks in projects (issue 44): 20,000 tasks filed into 1, 20 and 2,000
// projects through `task.project`, saved in saves of 1,000 and pushed by
// device A; device B's pull is timed. Each shape is its own zone.
func projectsDevice(_ name: String, zone: String) throws -> (ModelContainer, SyncEngine) {
    let url = URL(fileURLWithPath: directory.file(name + ".store"))
    let container = try ModelContainer(for: Project.self, ProjectTask.self, configurations: ModelConfiguration(url: url))
    let configuration = try SyncConfiguration(
        server: cluster.url, password: cluster.password, zone: zone, pollInterval: .seconds(60))
    return (container, try SyncEngine(container: container, configuration: configuration))
}

func tasksInProjects(tasks: Int, projects: Int) async throws {
    let zone = "projects-\(projects)"
    let (a, syncA) = try projectsDevice("pa-\(projects)", zone: zone)
    let context = ModelContext(a)
    var all: [Project] = []
    for index in 0..<projects {
        let project = Project(name: "Project \(index)")
        context.insert(project)
        all.append(project)
    }
    try context.save()
    for first in stride(from: 0, to: tasks, by: 1_000) {
        for index in first..<min(tasks, first + 1_000) {
            let task = ProjectTask(title: "Task \(index)", done: index % 3 == 0)
            context.insert(task)
            task.project = all[index % projects]
        }
        try context.save()
    }
    try await syncA.syncNow()
    let (b, syncB) = try projectsDevice("pb-\(projects)", zone: zone)
    let clock = ContinuousClock.now
    try await syncB.syncNow()
    let pull = ContinuousClock.now - clock
    let pullSeconds = Double(pull.components.seconds) + Double(pull.components.attoseconds) / 1e18
    let check = ModelContext(b)
    let first = try check.fetch(FetchDescriptor<Project>(predicate: #Predicate { $0.name == "Project 0" })).first
    let expected = (tasks + projects - 1) / projects
    guard let first, first.tasks.count == expected, try check.fetchCount(FetchDescriptor<ProjectTask>()) == tasks else {
        fatalError("b's Project 0 holds \(first?.tasks.count ?? -1) tasks, not \(expected)")
    }
    print(
        String(
            format: "tasks in projects: pull of %d tasks in %d project(s): %.2f s, %.0f objects/s", tasks, projects,
            pullSeconds, Double(tasks + projects) / pullSeconds))
}

/// The process's anonymous resident memory now, in MiB.
func anonymousMemory() -> Double {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("RssAnon:") } ?? ""
    return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
}

/// The peak of ``anonymousMemory()`` while `body` runs, sampled every 5 ms.
func peakMemory(during body: () async throws -> Void) async throws -> Double {
    final class Peak: @unchecked Sendable {
        // Guarded by `lock`.
        var value = 0.0
        var running = true
        let lock = NSLock()
    }
    let peak = Peak()
    let sampler = Thread {
        while peak.lock.withLock({ peak.running }) {
            let now = anonymousMemory()
            peak.lock.withLock { peak.value = max(peak.value, now) }
            usleep(5_000)
        }
    }
    sampler.start()
    try await body()
    let now = anonymousMemory()
    return peak.lock.withLock {
        peak.running = false
        return max(peak.value, now)
    }
}

func externalStorage(models: Int, size: Int) async throws {
    func scanDevice(_ name: String) throws -> (ModelContainer, SyncEngine) {
        let url = URL(fileURLWithPath: directory.file(name + ".store"))
        let container = try ModelContainer(for: Scan.self, configurations: ModelConfiguration(url: url))
        let configuration = try SyncConfiguration(
            server: cluster.url, password: cluster.password, zone: "scans", pollInterval: .seconds(60))
        return (container, try SyncEngine(container: container, configuration: configuration))
    }
    let (a, syncA) = try scanDevice("scan-a")
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    for first in stride(from: 0, to: models, by: 100) {
        // A context per save: the values saved are not held after it.
        let context = ModelContext(a)
        for index in first..<min(models, first + 100) {
            var page = [UInt8](repeating: 0, count: size)
            page.withUnsafeMutableBytes { raw in
                for word in 0..<size / 8 {
                    state ^= state << 13
                    state ^= state >> 7
                    state ^= state << 17
                    raw.storeBytes(of: state, toByteOffset: word * 8, as: UInt64.self)
                }
            }
            context.insert(Scan(label: "scan \(index)", page: Data(page)))
        }
        try context.save()
    }
    let megabytes = Double(models) * Double(size) / 1_048_576
    var clock = ContinuousClock.now
    let pushPeak = try await peakMemory { try await syncA.syncNow() }
    let push = ContinuousClock.now - clock
    let pushSeconds = Double(push.components.seconds) + Double(push.components.attoseconds) / 1e18
    let (b, syncB) = try scanDevice("scan-b")
    clock = ContinuousClock.now
    let pullPeak = try await peakMemory { try await syncB.syncNow() }
    let pull = ContinuousClock.now - clock
    let pullSeconds = Double(pull.components.seconds) + Double(pull.components.attoseconds) / 1e18
    let check = ModelContext(b)
    let pulled = try check.fetchCount(FetchDescriptor<Scan>())
    let last = try check.fetch(FetchDescriptor<Scan>(predicate: #Predicate { $0.label == "scan 0" })).first
    guard pulled == models, last?.page.count == size else {
        fatalError("b holds \(pulled) scans, the first of \(last?.page.count ?? -1) bytes")
    }
    print(
        String(
            format: "external storage: %d models of %d KiB (%.0f MiB): push %.2f s, %.1f MiB/s, peak %.0f MiB; "
                + "pull %.2f s, %.1f MiB/s, peak %.0f MiB",
            models, size / 1024, megabytes, pushSeconds, megabytes / pushSeconds, pushPeak, pullSeconds,
            megabytes / pullSeconds, pullPeak))
}

/// Ends a mode that runs alone: `exit` skips the `defer` above.
func finish() -> Never {
    cluster.destroy()
    try? FileManager.default.removeItem(atPath: directory.path)
    exit(0)
}

if CommandLine.arguments.contains("--external-only") {
    try await externalStorage(models: countArgument(default: 10_000), size: 100 * 1024)
    finish()
}

if CommandLine.arguments.contains("--projects-only") {
    for projects in [1, 20, 2_000] { try await tasksInProjects(tasks: 20_000, projects: projects) }
    finish()
}

print("sync-bench: \(count) models in saves of \(batch); PostgreSQL over 127.0.0.1 with fsync on")
let (a, syncA) = try device("a", zone: "bench")
let context = ModelContext(a)
let start = Date(timeIntervalSince1970: 1_700_000_000)
var saved = 0
while saved < count {
    for index in saved..<min(count, saved + batch) {
        context.insert(Reading(sensor: "s\(index % 97)", value: Double(index) * 0.5, taken: start + Double(index)))
    }
    try context.save()
    saved = min(count, saved + batch)
}
var clock = ContinuousClock.now
try await syncA.syncNow()
let push = ContinuousClock.now - clock
let pushSeconds = Double(push.components.seconds) + Double(push.components.attoseconds) / 1e18
print(
    String(
        format: "push: %.2f s, %.0f models/s (%d server transactions)", pushSeconds, Double(count) / pushSeconds,
        (count + batch - 1) / batch))

let (b, syncB) = try device("b", zone: "bench")
clock = ContinuousClock.now
try await syncB.syncNow()
let pull = ContinuousClock.now - clock
let pullSeconds = Double(pull.components.seconds) + Double(pull.components.attoseconds) / 1e18
let pulled = try ModelContext(b).fetchCount(FetchDescriptor<Reading>())
print(String(format: "pull: %.2f s, %.0f models/s (%d models on b)", pullSeconds, Double(count) / pullSeconds, pulled))
guard pulled == count else { fatalError("b holds \(pulled) models, not \(count)") }

// Latency: each sample waits for b to announce the one model a saved.
func latencies(context: ModelContext, a: SyncEngine, b: SyncEngine, bContainer: ModelContainer, samples: Int) async throws
    -> [Double]
{
    let (arrivals, arrived) = AsyncStream<Date>.makeStream()
    let observer = NotificationCenter.default.addObserver(
        forName: SyncEngine.didApplyRemoteChanges, object: bContainer, queue: nil
    ) { _ in arrived.yield(Date()) }
    defer { NotificationCenter.default.removeObserver(observer) }
    a.start()
    b.start()
    try await Task.sleep(for: .milliseconds(500))
    var iterator = arrivals.makeAsyncIterator()
    var result: [Double] = []
    for index in 0..<samples {
        context.insert(Reading(sensor: "live", value: Double(index), taken: Date()))
        try context.save()
        let saved = Date()
        guard let seen = await iterator.next() else { break }
        result.append(seen.timeIntervalSince(saved) * 1000)
    }
    await a.stop()
    await b.stop()
    return result.sorted()
}

let measured = try await latencies(context: context, a: syncA, b: syncB, bContainer: b, samples: samples)
let p50 = measured[min(measured.count - 1, measured.count / 2)]
let p99 = measured[min(measured.count - 1, measured.count * 99 / 100)]
print(String(format: "save on a to visible on b: p50 %.1f ms, p99 %.1f ms (%d samples)", p50, p99, measured.count))

for projects in [1, 20, 2_000] { try await tasksInProjects(tasks: 20_000, projects: projects) }

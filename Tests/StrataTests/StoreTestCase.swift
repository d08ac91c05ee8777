import Foundation
import StrataEngine
import StrataTesting
import XCTest

@testable import Strata

/// A test case with a fresh temporary directory for its store files,
/// removed at tear-down, and an integrity check of every store the test
/// used.
///
/// Containers made through ``container(for:name:)`` or passed to
/// ``track(_:)`` are checked at tear-down, before the directory goes: the
/// engine's check (pages, trees, counts) and the object layer's
/// (``ModelContainer/checkIntegrity()``: records, indexes, unique
/// constraints, relationships). A problem found, or a check that throws,
/// fails the test. A file store the test has closed is opened again
/// read-only, with the schema it was last opened with; stores that cannot
/// be opened again (in memory, on a simulated file system) are kept alive
/// until the check. A test that damages a store on purpose opts out with
/// ``skipIntegrityCheck(of:because:)``.
class StoreTestCase: XCTestCase {
    var directory: TemporaryDirectory!
    private var trackedStores: [TrackedStore] = []
    /// Reasons given for leaving stores out of the check, by store key;
    /// `"*"` leaves out every store of the test.
    private var exemptions: [String: String] = [:]

    /// A store a test opened.
    private struct TrackedStore {
        /// The container while the test holds it: file stores are held
        /// weakly, so that a test can close a store and open it again.
        weak var container: ModelContainer?
        /// A container whose store cannot be opened again, held until the
        /// check.
        var retained: ModelContainer?
        let key: String
        let schema: Schema
        let url: URL
        var reopenable: Bool { retained == nil }
    }

    override func setUpWithError() throws {
        try super.setUpWithError()
        directory = TemporaryDirectory()
        trackedStores = []
        exemptions = [:]
    }

    override func tearDown() {
        checkTrackedStores()
        trackedStores = []
        directory.remove()
        super.tearDown()
    }

    /// The URL of store file `name` in the test directory.
    func storeURL(_ name: String = "test.store") -> URL { URL(fileURLWithPath: directory.path + "/" + name) }

    /// A container for `types` (and the types they reach) on store file
    /// `name` in the test directory, checked at tear-down.
    func container(for types: [any PersistentModel.Type], name: String = "test.store") throws -> ModelContainer {
        try track(ModelContainer(for: Schema(types), configurations: [ModelConfiguration(url: storeURL(name))]))
    }

    /// How many models of `type` the store holds, counted in a new context.
    func count<T: PersistentModel>(_ type: T.Type, in container: ModelContainer) throws -> Int {
        try ModelContext(container).fetchCount(FetchDescriptor<T>())
    }

    /// Replaces the stored record of `id` with `bytes`, around the model
    /// layer (to damage it, or to put it back); returns the record it had.
    @discardableResult func replaceRecord(of id: PersistentIdentifier, in container: ModelContainer, with bytes: [UInt8])
        throws -> [UInt8]
    {
        let entity = try XCTUnwrap(container.schema.entity(named: id.entityName))
        let key = RowKey.encode(id.rowID)
        return try container.store.write { tx in
            let records = try tx.tree(entity.recordTree)
            let original = try XCTUnwrap(tx.get(key, in: records), "no record for \(id)")
            try tx.put(key, bytes, in: records)
            return original
        }
    }

    // MARK: Integrity check at tear-down

    /// Has `container`'s store checked at tear-down; returns it.
    @discardableResult func track(_ container: ModelContainer) -> ModelContainer {
        // A container of several stores: each store is checked.
        guard container.parts.isEmpty else {
            for part in container.parts { track(part) }
            return container
        }
        let configuration = container.orderedConfigurations[0]
        let reopenable = !configuration.isStoredInMemoryOnly && configuration.fileSystem == nil
        trackedStores.append(
            TrackedStore(
                container: container, retained: reopenable ? nil : container, key: Self.key(of: container),
                schema: container.schema, url: configuration.url))
        return container
    }

    /// Leaves `container`'s store out of the tear-down check, for a test
    /// that damages it on purpose; `reason` says how.
    func skipIntegrityCheck(of container: ModelContainer, because reason: String) {
        exemptions[Self.key(of: container)] = reason
    }

    /// Leaves every store of the test out of the tear-down check.
    func skipIntegrityCheck(because reason: String) {
        exemptions["*"] = reason
    }

    /// File stores by path (a later container of the same file replaces
    /// an earlier one); other stores one by one.
    private static func key(of container: ModelContainer) -> String {
        let configuration = container.orderedConfigurations[0]
        if configuration.isStoredInMemoryOnly || configuration.fileSystem != nil {
            return "container \(ObjectIdentifier(container).hashValue)"
        }
        return configuration.url.standardizedFileURL.path
    }

    private func checkTrackedStores() {
        guard exemptions["*"] == nil else { return }
        var keys: [String] = []
        var latest: [String: TrackedStore] = [:]
        for store in trackedStores {
            if latest[store.key] == nil { keys.append(store.key) }
            latest[store.key] = store
        }
        for key in keys where exemptions[key] == nil {
            guard let store = latest[key] else { continue }
            do {
                // A file store the test closed is opened again read-only.
                func reopen() throws -> ModelContainer? {
                    guard store.reopenable, FileManager.default.fileExists(atPath: store.url.path) else { return nil }
                    return try ModelContainer(
                        for: store.schema, configurations: [ModelConfiguration(url: store.url, allowsSave: false)])
                }
                guard var container = try store.retained ?? store.container ?? reopen() else { continue }
                var report: CheckReport
                do {
                    report = try container.store.database.check()
                } catch StorageError.closed {
                    guard let reopened = try reopen() else { continue }
                    container = reopened
                    report = try container.store.database.check()
                }
                if !report.isHealthy {
                    XCTFail("tear-down: the engine check of \(key) found \(report.problems.count) problem(s):\n\(report)")
                }
                let problems = try container.checkIntegrity()
                if !problems.isEmpty {
                    XCTFail(
                        "tear-down: checkIntegrity() of \(key) found \(problems.count) problem(s):\n"
                            + problems.prefix(20).map { "  \($0)" }.joined(separator: "\n"))
                }
            } catch {
                XCTFail("tear-down: the integrity check of \(key) threw \(error)")
            }
        }
    }
}

extension StoreTestCase {
    /// Power loss at every sync point of `save`, each run on `base` as it
    /// is after a power loss, with `seeds` ways of losing what was not
    /// synced: the store then reads (`state`) as before the save, and only
    /// when the save did not return, or as after it. Some crash points
    /// must come after the commit.
    func assertEveryCrashLeavesBeforeOrAfter(
        _ base: MemoryFileSystem, seeds: Int, state: (MemoryFileSystem) throws -> [String],
        save: (MemoryFileSystem) throws -> Void, file: StaticString = #filePath, line: UInt = #line
    ) throws {
        let before = try state(base.afterPowerLoss())
        let clean = base.afterPowerLoss()
        try save(clean)
        let after = try state(clean.afterPowerLoss())
        XCTAssertNotEqual(before, after, file: file, line: line)
        let syncPoints = clean.syncCount
        XCTAssertGreaterThan(syncPoints, 0, file: file, line: line)
        var outcomes: [String: Int] = [:]
        for n in 1...max(syncPoints, 1) {
            for seed in 0..<seeds {
                let fs = base.afterPowerLoss()
                fs.crashAtSync = n
                let saved = (try? save(fs)) != nil
                let found = try state(fs.afterPowerLoss(seed: UInt64(n * 100 + seed)))
                let label = "crash at sync \(n) of \(syncPoints), seed \(seed)"
                if found == before {
                    XCTAssertFalse(saved, "\(label): a save that returned is durable", file: file, line: line)
                    outcomes["before", default: 0] += 1
                } else {
                    XCTAssertEqual(found, after, label, file: file, line: line)
                    outcomes["after", default: 0] += 1
                }
            }
        }
        XCTAssertNotNil(outcomes["after"], "some crash points come after the commit: \(outcomes)", file: file, line: line)
    }
}

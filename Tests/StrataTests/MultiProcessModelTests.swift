import Foundation
import Strata
import StrataEngine
import StrataTesting
import XCTest

/// Two processes save to one store — upserts by a unique email, and
/// cascading deletes — while a third fetches: the unique constraint and
/// the delete rule hold across processes, every save of each is in the
/// history in commit order, and the fetching process sees the others'
/// saves, including changes to models it holds. Every store is checked
/// again at tear-down (``StoreTestCase``).
final class MultiProcessModelTests: StoreTestCase {
    func workerExecutable() throws -> String { try executableBesideTests("strata-model-worker") }

    func run(_ executable: String, _ arguments: [String], errors: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errors))
        try process.run()
        return process
    }

    func lines(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Two containers on shop file `name` in the test's directory, each
    /// with its own open store (as two processes have: a file system given
    /// explicitly keeps a container from sharing another's store).
    func twoStoresOfOneFile(named name: String = "shop.store") throws -> [ModelContainer] {
        try (0..<2).map { _ in
            try track(
                ModelContainer(
                    for: Customer.self, Order.self,
                    configurations: ModelConfiguration(url: storeURL(name), fileSystem: POSIXFileSystem())))
        }
    }

    func testTwoProcessesSaveAThirdFetches() throws {
        let executable = try workerExecutable()
        let store = directory.file("shop.store")
        let saves = 60
        // The store exists before the read-only fetcher opens it.
        _ = try track(
            ModelContainer(
                for: Customer.self, Order.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: store))))
        let fetcher = try run(
            executable, ["fetch", store, "9", "0", directory.file("fetch.out")], errors: directory.file("fetch.err"))
        var writers: [Process] = []
        for id in 0..<2 {
            writers.append(
                try run(
                    executable, ["save", store, "\(id)", "\(saves)", directory.file("save-\(id).out")],
                    errors: directory.file("save-\(id).err")))
        }
        for (id, writer) in writers.enumerated() {
            writer.waitUntilExit()
            XCTAssertEqual(
                writer.terminationStatus, 0,
                (try? String(contentsOfFile: directory.file("save-\(id).err"), encoding: .utf8)) ?? "")
            XCTAssertEqual(lines(directory.file("save-\(id).out")).count, saves, "writer \(id) acknowledged every save")
        }
        _ = FileManager.default.createFile(atPath: directory.file("fetch.out") + ".stop", contents: nil)
        fetcher.waitUntilExit()
        XCTAssertEqual(
            fetcher.terminationStatus, 0, (try? String(contentsOfFile: directory.file("fetch.err"), encoding: .utf8)) ?? "")

        let container = try track(
            ModelContainer(
                for: Customer.self, Order.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: store))))
        let context = ModelContext(container)
        XCTAssertEqual(try container.checkIntegrity(), [])
        let customers = try context.fetch(FetchDescriptor<Customer>(sortBy: [SortDescriptor(\.email)]))
        XCTAssertEqual(Set(customers.map(\.email)).count, customers.count, "one customer per email")
        let orders = try context.fetch(FetchDescriptor<Order>())
        // An upsert replaces the stored customer's orders with the inserted
        // one's (SwiftData's upsert takes every value of the insert), so
        // older orders may have no customer; those a customer lists point
        // back at it.
        for customer in customers {
            XCTAssertTrue(customer.orders.allSatisfy { $0.customer === customer }, customer.email)
        }
        XCTAssertGreaterThan(orders.count, 0)
        // Each writer's 60 saves are in the history, in commit order.
        let history = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        for id in 0..<2 {
            XCTAssertEqual(history.filter { $0.author == "writer\(id)" }.count, saves, "writer \(id)'s saves in the history")
        }
        XCTAssertEqual(history.map(\.token), history.map(\.token).sorted(), "history in commit order")
        // The fetching process's last fetch, through a read-only
        // container, saw the final state, the customers it had registered
        // included.
        let final = try XCTUnwrap(lines(directory.file("fetch.out")).last { $0.hasPrefix("final ") })
        let names = customers.map { "\($0.email)=\($0.name)" }.joined(separator: ",")
        XCTAssertEqual(final, "final \(orders.count) \(customers.count) \(names)")
    }

    /// Two containers on one file, each with its own open store (as two
    /// processes have), save in a seeded interleaving, some saves begun
    /// before the other's and finished after: each allocates row ids from
    /// its own counter, so inserts collide with the other's rows, and
    /// deletes cascade over rows the other saved. Seed 4 once gave an
    /// insert the row of a stored order that the same save's cascade was
    /// deleting, leaving an order pointing at a deleted customer.
    func testInterleavedSavesOfTwoStoresOnOneFileKeepTheStoreWhole() throws {
        for seed: UInt64 in [4, 11, 23, 37] {
            let containers = try twoStoresOfOneFile(named: "shop-\(seed).store")
            var random = SeededRandom(seed: seed)
            var pending: [ModelContext?] = [nil, nil]
            var counters = [0, 0]
            for step in 0..<400 {
                let id = random.choose(2)
                let i = counters[id]
                let context = pending[id] ?? ModelContext(containers[id])
                if pending[id] == nil {
                    try makeShopChange(i, writer: id, in: context)
                    if random.choose(2) == 0 {
                        pending[id] = context
                        continue
                    }
                }
                try context.save()
                pending[id] = nil
                counters[id] += 1
                let problems = try containers[0].checkIntegrity()
                XCTAssertEqual(problems, [], "seed \(seed), step \(step): writer \(id), save \(i)")
                if !problems.isEmpty { return }
            }
        }
    }

    /// A save's checks insert the models its relationships reach (a new
    /// order set on a new customer before being inserted itself), after
    /// the save looked for taken rows; the row the order then gets was
    /// saved by the other store after this save merged the other saves
    /// (in its `willSave` notification) and before it began writing. The
    /// order moves to a free row and both orders are kept.
    func testAModelTheSaveReachesMovesOffARowTheOtherStoreSaved() throws {
        let containers = try twoStoresOfOneFile()
        let mine = ModelContext(containers[0])
        // Used by the observer, which runs on this thread, inside save().
        nonisolated(unsafe) let theirs = ModelContext(containers[1])
        nonisolated(unsafe) let stored = Order(number: 1, writer: 1)
        nonisolated(unsafe) var failure: (any Error)?
        let observer = NotificationCenter.default.addObserver(forName: ModelContext.willSave, object: mine, queue: nil) {
            _ in
            theirs.insert(stored)
            do { try theirs.save() } catch { failure = error }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let customer = Customer(email: "a@example.com", name: "A")
        mine.insert(customer)
        let order = Order(number: 2, writer: 0)
        order.customer = customer
        XCTAssertNil(order.modelContext, "inserted by the save, not before")
        try mine.save()
        XCTAssertNil(failure)
        XCTAssertTrue(order.modelContext === mine)
        XCTAssertNotEqual(order.persistentModelID, stored.persistentModelID)
        let orders = try ModelContext(containers[0]).fetch(FetchDescriptor<Order>(sortBy: [SortDescriptor(\.number)]))
        XCTAssertEqual(orders.map(\.number), [1, 2])
        XCTAssertEqual(orders.map { $0.customer?.email }, [nil, "a@example.com"])
        XCTAssertEqual(try containers[0].checkIntegrity(), [])
    }

    /// A save that waits past the configuration's busy timeout for another
    /// process's write transaction throws `StorageError.busy`, writes
    /// nothing and keeps the context's changes; saved again later, they go.
    func testASaveBlockedPastTheBusyTimeoutThrowsBusyAndKeepsItsChanges() throws {
        let path = directory.file("shop.store")
        var configuration = ModelConfiguration(url: URL(fileURLWithPath: path))
        configuration.busyTimeout = .milliseconds(200)
        let container = try track(ModelContainer(for: Customer.self, Order.self, configurations: configuration))
        let context = ModelContext(container)
        context.insert(Customer(email: "a@example.com", name: "A"))
        // Another handle of the store (as another process would) holds a
        // write transaction.
        let other = try Database.open(path: path)
        let held = try other.beginWrite()
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? StorageError, .busy(path: path))
        }
        XCTAssertTrue(context.hasChanges, "the failed save keeps the changes")
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Customer>()), 0)
        held.rollback()
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Customer>()), 1)
        try other.close()
    }

    /// Each store numbers its inserts itself: an unsaved insert of one
    /// shares its row number with a row the other saved. A fetch returns
    /// the stored row as its own model, never the unsaved insert; the
    /// insert gets another row and both are saved.
    func testAnUnsavedInsertWhoseRowAnotherStoreSavedStaysApart() throws {
        let containers = try twoStoresOfOneFile()
        let mine = ModelContext(containers[0])
        let pending = Customer(email: "mine@example.com", name: "unsaved")
        mine.insert(pending)
        let theirs = ModelContext(containers[1])
        let saved = Customer(email: "theirs@example.com", name: "saved")
        theirs.insert(saved)
        try theirs.save()
        XCTAssertEqual(pending.persistentModelID.entityName, saved.persistentModelID.entityName)
        let fetched = try mine.fetch(FetchDescriptor<Customer>(predicate: #Predicate { $0.email == "theirs@example.com" }))
        XCTAssertEqual(fetched.map(\.name), ["saved"])
        XCTAssertFalse(fetched.contains { $0 === pending }, "the stored row is not the unsaved insert")
        XCTAssertNotEqual(pending.persistentModelID, fetched.first?.persistentModelID)
        try mine.save()
        let all = try ModelContext(containers[1]).fetch(FetchDescriptor<Customer>(sortBy: [SortDescriptor(\.email)]))
        XCTAssertEqual(all.map(\.email), ["mine@example.com", "theirs@example.com"])
        XCTAssertEqual(try containers[0].checkIntegrity(), [])
    }
}

import Foundation
import Observation
import StrataEngine
import StrataTesting
import XCTest

@testable import Strata

@Model final class LiveBoard {
    var name: String
    @Relationship(inverse: \LiveTicket.board) var tickets: [LiveTicket] = []
    init(name: String) { self.name = name }
}

@Model final class LiveTicket {
    var title: String
    var isOpen: Bool
    var notes: String = ""
    var board: LiveBoard?
    init(title: String, isOpen: Bool = true) {
        self.title = title
        self.isOpen = isOpen
    }
}

@Model final class LiveNote {
    var text: String
    init(text: String) { self.text = text }
}

/// Saves tickets from an actor of its own, as an app's background worker
/// does.
@ModelActor actor TicketWriter {
    func add(_ title: String, isOpen: Bool = true) throws {
        modelContext.insert(LiveTicket(title: title, isOpen: isOpen))
        try modelContext.save()
    }
}

/// Live results: a sequence delivers the current value at once, one new
/// value per commit that can change it — from another context, actor or
/// process — none for commits that cannot, coalesces bursts, and ends on
/// cancellation, container close or a read that throws.
final class LiveResultsTests: StoreTestCase {
    static let openTickets = FetchDescriptor<LiveTicket>(
        predicate: #Predicate { $0.isOpen }, sortBy: [SortDescriptor(\.title)])

    func makeContainer() throws -> ModelContainer {
        try container(for: [LiveBoard.self, LiveTicket.self, LiveNote.self])
    }

    /// Iterates `sequence(context)` in a task with a context of its own,
    /// recording each value as `map` gives it.
    func observe<Value, Recorded: Sendable>(
        _ container: ModelContainer, _ sequence: @escaping @Sendable (ModelContext) -> LiveResults<Value>,
        map: @escaping @Sendable (Value) -> Recorded
    ) -> (Task<Void, Never>, Recorder<Recorded>) {
        let recorder = Recorder<Recorded>()
        let task = Task.detached {
            let context = ModelContext(container)
            do {
                for try await value in sequence(context) { recorder.record(map(value)) }
                recorder.finish()
            } catch {
                recorder.finish(error)
            }
        }
        return (task, recorder)
    }

    func observeOpenTitles(_ container: ModelContainer) -> (Task<Void, Never>, Recorder<[String]>) {
        observe(container, { $0.liveResults(Self.openTickets) }, map: { $0.map(\.title) })
    }

    /// Lets commits that should produce nothing have their chance to.
    func settle() async throws { try await Task.sleep(for: .milliseconds(150)) }

    /// Observes the open tickets' titles, checks the current value comes
    /// at once, runs `save`, and checks that exactly one new value follows.
    func assertOneNewValue(
        _ expected: [String], after save: (ModelContainer) async throws -> Void, line: UInt = #line
    ) async throws {
        let container = try makeContainer()
        let (task, values) = observeOpenTitles(container)
        defer { task.cancel() }
        let first = await values.wait(forCount: 1)
        XCTAssertTrue(first, line: line)
        XCTAssertEqual(values.recorded, [[]], "the current value comes at once", line: line)
        try await save(container)
        let second = await values.wait(forCount: 2)
        XCTAssertTrue(second, line: line)
        try await settle()
        XCTAssertEqual(values.recorded, [[], expected], line: line)
    }

    func testAnotherContextsSaveGivesExactlyOneNewValue() async throws {
        try await assertOneNewValue(["printer jam"]) { container in
            let context = ModelContext(container)
            context.insert(LiveTicket(title: "printer jam"))
            try context.save()
        }
    }

    func testAnotherActorsSaveGivesExactlyOneNewValue() async throws {
        try await assertOneNewValue(["badge reader"]) { container in
            try await TicketWriter(modelContainer: container).add("badge reader")
        }
    }

    func testCommitsThatCannotChangeTheResultGiveNoValue() async throws {
        let container = try makeContainer()
        let context = ModelContext(container)
        let board = LiveBoard(name: "IT")
        let ticket = LiveTicket(title: "vpn")
        context.insert(board)
        context.insert(ticket)
        try context.save()
        let (task, values) = observeOpenTitles(container)
        defer { task.cancel() }
        _ = await values.wait(forCount: 1)
        // Another entity, and an attribute neither predicate nor sort reads.
        context.insert(LiveNote(text: "lunch"))
        try context.save()
        ticket.notes = "asked twice"
        try context.save()
        try await settle()
        XCTAssertEqual(values.recorded.count, 1, "\(values.recorded)")
        // An attribute the predicate reads.
        ticket.isOpen = false
        try context.save()
        let closed = await values.wait(forCount: 2)
        XCTAssertTrue(closed)
        XCTAssertEqual(values.recorded.last, [])
        // An attribute the sort reads.
        ticket.isOpen = true
        try context.save()
        _ = await values.wait(forCount: 3)
        ticket.title = "VPN"
        try context.save()
        let renamed = await values.wait(forCount: 4)
        XCTAssertTrue(renamed)
        XCTAssertEqual(values.recorded.last, ["VPN"])
    }

    func testAModelReachedThroughARelationshipCounts() async throws {
        let container = try makeContainer()
        let context = ModelContext(container)
        let board = LiveBoard(name: "IT")
        let ticket = LiveTicket(title: "vpn")
        context.insert(board)
        context.insert(ticket)
        ticket.board = board
        try context.save()
        let onIT = FetchDescriptor<LiveTicket>(predicate: #Predicate { $0.board?.name == "IT" })
        let (task, values) = observe(container, { $0.liveResults(onIT) }, map: { $0.map(\.title) })
        defer { task.cancel() }
        _ = await values.wait(forCount: 1)
        XCTAssertEqual(values.recorded, [["vpn"]])
        board.name = "Facilities"
        try context.save()
        let moved = await values.wait(forCount: 2)
        XCTAssertTrue(moved)
        XCTAssertEqual(values.recorded.last, [])
    }

    func testABurstOfSavesEndsAtTheLastValueInFarFewerValues() async throws {
        let container = try makeContainer()
        let counts = FetchDescriptor<LiveTicket>()
        // A slow consumer: each value takes it 5 ms.
        let (task, values) = observe(
            container, { $0.liveCount(counts) },
            map: { count in
                Thread.sleep(forTimeInterval: 0.005)
                return count
            })
        defer { task.cancel() }
        _ = await values.wait(forCount: 1)
        let writer = ModelContext(container)
        for index in 0..<1000 {
            writer.insert(LiveTicket(title: "t\(index)"))
            try writer.save()
        }
        let reached = await values.wait { $0.last == 1000 }
        XCTAssertTrue(reached, "last value \(String(describing: values.recorded.last))")
        XCTAssertLessThan(values.recorded.count, 500, "values coalesce under load")
        XCTAssertEqual(values.recorded, values.recorded.sorted(), "values only grow")
    }

    func testCancellingTheTaskEndsTheSequence() async throws {
        let container = try makeContainer()
        let (task, values) = observeOpenTitles(container)
        _ = await values.wait(forCount: 1)
        XCTAssertEqual(container.mergeHub.observerCount.load(ordering: .relaxed), 1)
        task.cancel()
        let ended = await values.waitForEnd()
        XCTAssertTrue(ended)
        XCTAssertNil(values.error)
        await task.value
        XCTAssertEqual(container.mergeHub.observerCount.load(ordering: .relaxed), 0, "the observer leaves the hub")
    }

    func testClosingTheContainerEndsTheSequence() async throws {
        let container = try makeContainer()
        let (task, values) = observeOpenTitles(container)
        defer { task.cancel() }
        _ = await values.wait(forCount: 1)
        container.invalidate()
        let ended = await values.waitForEnd()
        XCTAssertTrue(ended)
        XCTAssertNil(values.error)
        XCTAssertThrowsError(try ModelContext(container).fetchCount(FetchDescriptor<LiveTicket>())) { error in
            XCTAssertEqual(error as? SwiftDataError, .loadIssueModelContainer)
        }
        // A sequence made after the close ends at once.
        var iterator = ModelContext(container).liveCount(FetchDescriptor<LiveTicket>()).makeAsyncIterator()
        let value = try await iterator.next()
        XCTAssertNil(value)
        container.invalidate()
    }

    func testAnUnsupportedPredicateFailsItsSequenceOnly() async throws {
        let container = try makeContainer()
        let subscripted = FetchDescriptor(predicate: #Predicate<LiveTicket> { [1, 2][$0.title.count] == 1 })
        let (badTask, bad) = observe(container, { $0.liveResults(subscripted) }, map: { $0.count })
        let (task, good) = observeOpenTitles(container)
        defer {
            badTask.cancel()
            task.cancel()
        }
        let badEnded = await bad.waitForEnd()
        XCTAssertTrue(badEnded)
        XCTAssertEqual(bad.error as? SwiftDataError, .unsupportedPredicate)
        _ = await good.wait(forCount: 1)
        let context = ModelContext(container)
        context.insert(LiveTicket(title: "still here"))
        try context.save()
        let arrived = await good.wait(forCount: 2)
        XCTAssertTrue(arrived)
    }

    func testADamagedRecordEndsTheSequenceWithATypedError() async throws {
        let container = try makeContainer()
        skipIntegrityCheck(of: container, because: "the test damages a record")
        let context = ModelContext(container)
        let ticket = LiveTicket(title: "vpn")
        context.insert(ticket)
        context.insert(LiveNote(text: "a"))
        try context.save()
        let (task, values) = observeOpenTitles(container)
        let (noteTask, notes) = observe(container, { $0.liveCount(FetchDescriptor<LiveNote>()) }, map: { $0 })
        defer {
            task.cancel()
            noteTask.cancel()
        }
        _ = await values.wait(forCount: 1)
        _ = await notes.wait(forCount: 1)
        try replaceRecord(of: ticket.persistentModelID, in: container, with: [0xFF, 0x13, 0x07])
        context.insert(LiveTicket(title: "new"))
        try context.save()
        let ended = await values.waitForEnd()
        XCTAssertTrue(ended)
        XCTAssertEqual(values.error as? SwiftDataError, .corruptRecord, "\(String(describing: values.error))")
        context.insert(LiveNote(text: "b"))
        try context.save()
        let noted = await notes.wait { $0.last == 2 }
        XCTAssertTrue(noted, "other sequences go on: \(notes.recorded)")
    }

    func testCountAndOneModelSequences() async throws {
        let container = try makeContainer()
        let context = ModelContext(container)
        let ticket = LiveTicket(title: "vpn")
        let other = LiveTicket(title: "printer")
        context.insert(ticket)
        context.insert(other)
        try context.save()
        let id = ticket.persistentModelID
        let (task, model) = observe(
            container, { $0.liveModel(for: id, as: LiveTicket.self) }, map: { $0?.notes ?? "<deleted>" })
        defer { task.cancel() }
        _ = await model.wait(forCount: 1)
        other.notes = "someone else's"
        try context.save()
        try await settle()
        XCTAssertEqual(model.recorded, [""], "another model's change gives no value")
        ticket.notes = "rebooted"
        try context.save()
        _ = await model.wait(forCount: 2)
        context.delete(ticket)
        try context.save()
        let deleted = await model.wait(forCount: 3)
        XCTAssertTrue(deleted)
        XCTAssertEqual(model.recorded, ["", "rebooted", "<deleted>"])
    }

    func testAnotherProcessSaveGivesExactlyOneNewValue() async throws {
        let executable = try executableBesideTests("strata-model-worker")
        let url = storeURL("shop.store")
        let container = try track(
            ModelContainer(for: Customer.self, Order.self, configurations: ModelConfiguration(url: url)))
        let (task, values) = observe(container, { $0.liveCount(FetchDescriptor<Order>()) }, map: { $0 })
        defer { task.cancel() }
        _ = await values.wait(forCount: 1)
        let worker = Process()
        worker.executableURL = URL(fileURLWithPath: executable)
        worker.arguments = ["save", url.path, "0", "1", directory.path + "/save.out"]
        try worker.run()
        worker.waitUntilExit()
        XCTAssertEqual(worker.terminationStatus, 0)
        let arrived = await values.wait(forCount: 2)
        XCTAssertTrue(arrived)
        try await settle()
        XCTAssertEqual(values.recorded, [0, 1])
    }

    func testALiveQueryTellsObservationAndFetchesWhenRead() throws {
        let container = try makeContainer()
        let context = ModelContext(container)
        let query = LiveQuery(Self.openTickets, in: context)
        XCTAssertEqual(query.results.map(\.title), [])
        let told = Recorder<Int>()
        withObservationTracking {
            _ = query.results
        } onChange: {
            told.record(1)
        }
        let other = ModelContext(container)
        other.insert(LiveNote(text: "unrelated"))
        try other.save()
        XCTAssertEqual(told.recorded.count, 0, "an unrelated commit tells nothing")
        other.insert(LiveTicket(title: "monitor"))
        try other.save()
        XCTAssertEqual(told.recorded.count, 1, "told once the save returns")
        XCTAssertEqual(query.results.map(\.title), ["monitor"])
        XCTAssertNil(query.fetchError)
    }

    /// Observation handlers run on the committing thread: one that reads
    /// the store there must not deadlock, whether the commit is this
    /// process's save or another process's, published by the watcher.
    func testAHandlerThatReadsTheStoreDoesNotDeadlock() async throws {
        let executable = try executableBesideTests("strata-model-worker")
        let url = storeURL("shop.store")
        let container = try track(
            ModelContainer(for: Customer.self, Order.self, configurations: ModelConfiguration(url: url)))
        let query = LiveQuery(FetchDescriptor<Order>(), in: ModelContext(container))
        XCTAssertEqual(query.results.count, 0)
        let counted = Recorder<Int>()
        let track = {
            withObservationTracking {
                _ = query.results
            } onChange: {
                do {
                    counted.record(try ModelContext(container).fetchCount(FetchDescriptor<Order>()))
                } catch {
                    counted.finish(error)
                }
            }
        }
        track()
        let worker = Process()
        worker.executableURL = URL(fileURLWithPath: executable)
        worker.arguments = ["save", url.path, "0", "1", directory.path + "/save.out"]
        try worker.run()
        worker.waitUntilExit()
        XCTAssertEqual(worker.terminationStatus, 0)
        let fromWatcher = await counted.wait(forCount: 1)
        XCTAssertTrue(fromWatcher)
        XCTAssertNil(counted.error)
        XCTAssertEqual(query.results.count, 1)
        track()
        let context = ModelContext(container)
        context.insert(Order(number: 2, writer: 9))
        try context.save()
        XCTAssertEqual(counted.recorded, [1, 2], "the handler ran during the save and read it")
    }

    @MainActor func testQueryPropertiesReadTheEnvironmentsContext() throws {
        // A view's properties, in code shared with an app (views are
        // main-actor types).
        @MainActor struct TicketList {
            @Query var all: [LiveTicket]
            @Query(sort: \LiveTicket.title, order: .reverse) var newestFirst: [LiveTicket]
            @Query(filter: #Predicate<LiveTicket> { $0.isOpen }, sort: [SortDescriptor(\LiveTicket.title)]) var open: [LiveTicket]
            @Query(FetchDescriptor<LiveTicket>(predicate: #Predicate { !$0.isOpen }), animation: .default) var closed:
                [LiveTicket]
            @Query(filter: #Predicate<LiveTicket> { $0.isOpen }, sort: \LiveTicket.board?.name, transaction: Transaction())
            var byBoard: [LiveTicket]

            init() {}

            /// As a SwiftUI view sets a query from its arguments.
            init(titled title: String) {
                _all = Query(filter: #Predicate { $0.title == title })
            }

            var openError: (any Error)? { _open.fetchError }
            var allError: (any Error)? { _all.fetchError }
            var openContext: ModelContext? { _open.modelContext }
        }
        let list = TicketList()
        XCTAssertEqual(list.all.count, 0)
        XCTAssertEqual(list.allError as? SwiftDataError, .missingModelContext)

        let container = try makeContainer()
        let context = container.mainContext
        try QueryEnvironment.withModelContext(context) {
            XCTAssertEqual(list.all.count, 0)
            let other = ModelContext(container)
            other.insert(LiveTicket(title: "a"))
            other.insert(LiveTicket(title: "b", isOpen: false))
            try other.save()
            XCTAssertEqual(list.all.count, 2)
            XCTAssertEqual(list.newestFirst.map(\.title), ["b", "a"])
            XCTAssertEqual(list.open.map(\.title), ["a"])
            XCTAssertEqual(list.closed.map(\.title), ["b"])
            XCTAssertEqual(list.byBoard.map(\.title), ["a"])
            XCTAssertNil(list.openError)
            XCTAssertTrue(list.openContext === context)
            XCTAssertEqual(TicketList(titled: "b").all.map(\.title), ["b"])
        }
    }
}

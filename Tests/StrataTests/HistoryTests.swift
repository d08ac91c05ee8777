import Foundation
import StrataEngine
import StrataTesting
import XCTest

@testable import Strata

@Model final class Memo {
    @Attribute(.preserveValueOnDeletion) var title: String
    var body: String
    @Attribute(.preserveValueOnDeletion) var priority: Int
    @Attribute(.preserveValueOnDeletion) var due: Date?

    init(title: String, body: String, priority: Int, due: Date? = nil) {
        self.title = title
        self.body = body
        self.priority = priority
        self.due = due
    }
}

final class HistoryTests: StoreTestCase {
    func makeContainer(history: Bool = true) throws -> ModelContainer {
        var configuration = ModelConfiguration(url: storeURL())
        configuration.recordsHistory = history
        return try track(ModelContainer(for: Schema([Memo.self]), configurations: [configuration]))
    }

    func history(_ container: ModelContainer, _ predicate: Predicate<DefaultHistoryTransaction>? = nil) throws
        -> [DefaultHistoryTransaction]
    {
        try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: predicate))
    }

    /// Three saves from two authors: inserts, an update, a delete.
    func threeSaves(_ container: ModelContainer) throws -> [Memo] {
        let app = ModelContext(container)
        app.author = "app"
        let due = Date(timeIntervalSinceReferenceDate: 1000)
        let memos = (0..<3).map { Memo(title: "t\($0)", body: "b\($0)", priority: $0, due: $0 == 0 ? due : nil) }
        for memo in memos { app.insert(memo) }
        try app.save()
        let widget = ModelContext(container)
        widget.author = "widget"
        let id = memos[1].persistentModelID
        let second = try widget.fetch(FetchDescriptor<Memo>(predicate: #Predicate { $0.persistentModelID == id }))
        second.first?.body = "changed"
        try widget.save()
        app.delete(memos[0])
        try app.save()
        return memos
    }

    func testEachSaveRecordsItsChangesAuthorAndTombstones() throws {
        let container = try makeContainer()
        let memos = try threeSaves(container)
        let transactions = try history(container)
        XCTAssertEqual(transactions.count, 3)
        XCTAssertEqual(transactions.map(\.author), ["app", "widget", "app"])
        XCTAssertEqual(transactions.map(\.token.tokenValue), [1, 2, 3])
        XCTAssertTrue(transactions[0].token < transactions[1].token)

        let inserted = transactions[0].changes.compactMap { change -> PersistentIdentifier? in
            guard case .insert(let insert) = change, insert is DefaultHistoryInsert<Memo> else { return nil }
            return insert.changedPersistentIdentifier
        }
        XCTAssertEqual(Set(inserted), Set(memos.map(\.persistentModelID)))

        XCTAssertEqual(transactions[1].changes.count, 1)
        guard case .update(let update as DefaultHistoryUpdate<Memo>) = transactions[1].changes.first else {
            return XCTFail("expected an update, got \(transactions[1].changes)")
        }
        XCTAssertEqual(update.changedPersistentIdentifier, memos[1].persistentModelID)
        XCTAssertEqual(update.updatedAttributes, [\Memo.body], "only the attribute whose value changed")

        guard case .delete(let delete as DefaultHistoryDelete<Memo>) = transactions[2].changes.first else {
            return XCTFail("expected a delete, got \(transactions[2].changes)")
        }
        XCTAssertEqual(delete.changedPersistentIdentifier, memos[0].persistentModelID)
        XCTAssertEqual(delete.tombstone[\.title], "t0")
        XCTAssertEqual(delete.tombstone[\.priority], 0)
        XCTAssertEqual(delete.tombstone[\.due], Date(timeIntervalSinceReferenceDate: 1000))
        XCTAssertNil(delete.tombstone[\.body], "body is not preserved")
        XCTAssertEqual(Array(delete.tombstone).count, 3)
    }

    /// An update's attribute indexes are not counts: the last one of a
    /// transaction may exceed the bytes left after it. A save that changes
    /// every attribute of one model once failed to read back as a damaged
    /// transaction ("a count of 2 past the end").
    func testAnUpdateOfManyAttributesReadsBack() throws {
        let container = try makeContainer()
        let context = ModelContext(container)
        let memo = Memo(title: "t", body: "b", priority: 1)
        context.insert(memo)
        try context.save()
        memo.title = "t2"
        memo.body = "b2"
        memo.priority = 2
        memo.due = Date(timeIntervalSinceReferenceDate: 5)
        try context.save()
        let transactions = try history(container)
        XCTAssertEqual(transactions.count, 2)
        guard case .update(let update as DefaultHistoryUpdate<Memo>) = transactions.last?.changes.first else {
            return XCTFail("expected an update, got \(transactions.last?.changes ?? [])")
        }
        XCTAssertEqual(Set(update.updatedAttributes), [\Memo.title, \Memo.body, \Memo.priority, \Memo.due])
    }

    func testPredicatesOnTokenAndAuthorAcrossReopening() throws {
        var first: DefaultHistoryToken?
        do {
            let container = try makeContainer()
            _ = try threeSaves(container)
            first = try history(container).first?.token
        }
        let container = try makeContainer()
        let token = try XCTUnwrap(first)
        let after = try history(container, #Predicate { $0.token > token })
        XCTAssertEqual(after.map(\.token.tokenValue), [2, 3])
        let widget = try history(container, #Predicate { $0.token > token && $0.author == "widget" })
        XCTAssertEqual(widget.map(\.token.tokenValue), [2])
        // Tokens are Codable.
        let decoded = try JSONDecoder().decode(DefaultHistoryToken.self, from: JSONEncoder().encode(token))
        XCTAssertEqual(decoded, token)
    }

    func testDeletedHistoryExpiresOlderTokensAndTokensAreNeverReused() throws {
        let container = try makeContainer()
        _ = try threeSaves(container)
        let tokens = try history(container).map(\.token)
        let second = tokens[1]
        try ModelContext(container).deleteHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token <= second }))
        XCTAssertEqual(try history(container).map(\.token.tokenValue), [3])
        let first = tokens[0]
        XCTAssertThrowsError(try history(container, #Predicate { $0.token > first })) { error in
            XCTAssertEqual(error as? SwiftDataError, .historyTokenExpired)
        }
        XCTAssertEqual(try history(container, #Predicate { $0.token > second }).map(\.token.tokenValue), [3])

        try ModelContext(container).deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        let context = ModelContext(container)
        context.insert(Memo(title: "new", body: "", priority: 9))
        try context.save()
        XCTAssertEqual(try history(container).map(\.token.tokenValue), [4], "tokens continue after deletion")
    }

    /// `token > t` (alone or in a conjunction) starts the fetch after `t`.
    func testTokenBoundsStartTheFetch() {
        let token = DefaultHistoryToken(storeIdentifier: "s", tokenValue: 41)
        XCTAssertEqual(HistoryLog.lowerBound(of: #Predicate<DefaultHistoryTransaction> { $0.token > token }), 42)
        XCTAssertEqual(HistoryLog.lowerBound(of: #Predicate<DefaultHistoryTransaction> { $0.token >= token }), 41)
        XCTAssertEqual(
            HistoryLog.lowerBound(of: #Predicate<DefaultHistoryTransaction> { $0.author == "a" && $0.token > token }), 42)
        XCTAssertEqual(HistoryLog.lowerBound(of: #Predicate<DefaultHistoryTransaction> { $0.token < token }), 0)
        XCTAssertEqual(
            HistoryLog.lowerBound(of: #Predicate<DefaultHistoryTransaction> { $0.token > token || $0.author == "a" }), 0)
    }

    /// The configuration's durability reaches the engine, and a store
    /// saved with `.none` reopens with its data after a clean close.
    func testDurabilityIsPerConfiguration() throws {
        var configuration = ModelConfiguration(url: storeURL("fast.store"))
        configuration.durability = Durability.none
        do {
            let container = try track(ModelContainer(for: Schema([Memo.self]), configurations: [configuration]))
            XCTAssertEqual(container.store.database.options.durability, Durability.none)
            let context = ModelContext(container)
            context.insert(Memo(title: "bulk", body: "", priority: 0))
            try context.save()
        }
        let reopened = try track(
            ModelContainer(
                for: Schema([Memo.self]), configurations: [ModelConfiguration(url: storeURL("fast.store"))]))
        XCTAssertEqual(reopened.store.database.options.durability, .full)
        XCTAssertEqual(try count(Memo.self, in: reopened), 1)
    }

    func testDeletingHistoryOfAReadOnlyStoreIsRefused() throws {
        _ = try threeSaves(try makeContainer())
        let readOnly = try track(
            ModelContainer(
                for: Schema([Memo.self]), configurations: [ModelConfiguration(url: storeURL(), allowsSave: false)]))
        XCTAssertThrowsError(try ModelContext(readOnly).deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())) {
            error in
            XCTAssertEqual(error as? SwiftDataError, .readOnlyStore)
        }
        XCTAssertEqual(try history(readOnly).count, 3)
    }

    func testHistoryCanBeSwitchedOff() throws {
        let container = try makeContainer(history: false)
        _ = try threeSaves(container)
        XCTAssertEqual(try history(container).count, 0)
    }

    /// The token counter shares the history tree's last leaf with the
    /// newest transaction: a save of one new model writes its record's
    /// page, the history's page and the catalog's (entry counts), and
    /// nothing else. It wrote a fourth, `h.meta`'s, before.
    func testASaveOfOneModelWritesThreePages() throws {
        let container = try makeContainer()
        _ = try threeSaves(container)
        let database = container.store.database
        let context = ModelContext(container)
        for i in 0..<5 {
            let before = database.statistics.walFrames
            context.insert(Memo(title: "lean\(i)", body: "", priority: 9, due: nil))
            try context.save()
            let after = database.statistics.walFrames
            // A checkpoint and log restart in between would reset the count.
            if after > before { XCTAssertEqual(after - before, 3, "save \(i)") }
        }
        XCTAssertEqual(try history(container).count, 3 + 5)
    }

    /// A store whose last token is in `h.meta` (written before the counter
    /// moved into `h.transactions`) goes on from it: no token is issued
    /// twice, and tokens taken before stay valid.
    func testTokensGoOnFromTheCounterOfAnOlderStore() throws {
        let container = try makeContainer()
        _ = try threeSaves(container)
        let tokens = try history(container).map(\.token.tokenValue)
        XCTAssertEqual(tokens, [1, 2, 3])
        // Rewrite the counter as an older store kept it (and a higher one,
        // as if history had been deleted).
        try container.store.database.write { tx in
            try tx.delete(HistoryLog.counterKey, in: try tx.tree(HistoryLog.transactions))
            let meta = try tx.createTree(HistoryLog.meta)
            try tx.put(HistoryLog.lastKey, RowKey.encode(7), in: meta)
        }
        let context = ModelContext(container)
        context.insert(Memo(title: "next", body: "", priority: 1, due: nil))
        try context.save()
        XCTAssertEqual(try history(container).map(\.token.tokenValue), [1, 2, 3, 8])
        context.insert(Memo(title: "after", body: "", priority: 1, due: nil))
        try context.save()
        XCTAssertEqual(try history(container).map(\.token.tokenValue).last, 9)
    }

    func testDamagedHistoryThrowsATypedError() throws {
        let container = try makeContainer()
        _ = try threeSaves(container)
        try container.store.database.write { tx in
            try tx.put(RowKey.encode(2), [1, 0xFF, 0xFF], in: try tx.tree(HistoryLog.transactions))
        }
        XCTAssertThrowsError(try history(container)) { error in
            XCTAssertEqual(error as? SwiftDataError, .corruptRecord, "\(error)")
        }
    }
}

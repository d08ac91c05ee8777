import Foundation
import StrataEngine
import StrataTesting
import XCTest

@testable import Strata

/// A save's participants (`ModelContext.save(with:)`) and history's holds:
/// the two ways the object layer lets another part of the program (sync)
/// keep state beside a save, without the save knowing which part it is.
final class SaveParticipantTests: StoreTestCase {
    /// Writes one key per save in its tree `test.participant`, and keeps
    /// what it was shown.
    final class Recorder: SaveParticipant {
        var shown: [SaveParticipation] = []
        var failure: Error?

        func saveWillCommit(_ save: SaveParticipation) throws {
            shown.append(save)
            let tx = save.transaction
            let tree = try tx.treeIfPresent("test.participant") ?? tx.createTree("test.participant")
            try tx.put(Array("save \(shown.count)".utf8), [1], in: tree)
            if let failure { throw failure }
        }
    }

    struct Refused: Error {}

    func makeContainer() throws -> ModelContainer {
        var configuration = ModelConfiguration(url: storeURL())
        configuration.recordsHistory = true
        return try track(ModelContainer(for: Schema([Memo.self]), configurations: [configuration]))
    }

    func participantKeys(_ container: ModelContainer) throws -> [String] {
        try container.store.read { tx in
            guard let tree = try tx.treeIfPresent("test.participant") else { return [] }
            var keys: [String] = []
            try tx.forEach(tree) { key, _ in
                keys.append(String(decoding: key, as: UTF8.self))
                return true
            }
            return keys
        }
    }

    func historyTokens(_ container: ModelContainer) throws -> [Int64] {
        try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.token.tokenValue)
    }

    func testAParticipantSeesTheChangeSetAndCommitsWithTheSave() throws {
        let container = try makeContainer()
        let context = ModelContext(container)
        let kept = Memo(title: "kept", body: "", priority: 1)
        let gone = Memo(title: "gone", body: "", priority: 2)
        context.insert(kept)
        context.insert(gone)
        try context.save()

        let recorder = Recorder()
        let added = Memo(title: "added", body: "", priority: 3)
        context.insert(added)
        kept.body = "changed"
        context.delete(gone)
        let goneID = gone.persistentModelID
        try context.save(with: recorder)

        XCTAssertEqual(recorder.shown.count, 1)
        let shown = try XCTUnwrap(recorder.shown.first)
        XCTAssertEqual(shown.inserted, [added.persistentModelID])
        XCTAssertEqual(shown.updated, [kept.persistentModelID])
        XCTAssertEqual(shown.deleted, [goneID])
        XCTAssertEqual(shown.historyToken, 2, "the save's own history entry")
        XCTAssertEqual(try participantKeys(container), ["save 1"])
        XCTAssertEqual(try count(Memo.self, in: container), 2)
        XCTAssertFalse(context.hasChanges)

        // The participant joined that save only.
        context.insert(Memo(title: "later", body: "", priority: 4))
        try context.save()
        XCTAssertEqual(recorder.shown.count, 1)
    }

    func testAParticipantThatThrowsAbandonsTheSaveAndTheContextKeepsItsChanges() throws {
        let container = try makeContainer()
        let context = ModelContext(container)
        let memo = Memo(title: "pending", body: "", priority: 1)
        context.insert(memo)
        let recorder = Recorder()
        recorder.failure = Refused()
        XCTAssertThrowsError(try context.save(with: recorder)) { error in
            XCTAssertTrue(error is Refused, "\(error)")
        }
        XCTAssertEqual(try count(Memo.self, in: container), 0)
        XCTAssertEqual(try participantKeys(container), [], "the participant's write is rolled back with the save")
        XCTAssertEqual(try historyTokens(container), [])
        XCTAssertTrue(context.hasChanges)
        XCTAssertEqual(context.insertedModelsArray.count, 1)

        // The same changes save once the participant no longer refuses.
        recorder.failure = nil
        try context.save(with: recorder)
        XCTAssertEqual(try count(Memo.self, in: container), 1)
        XCTAssertEqual(try participantKeys(container), ["save 2"])
    }

    func testWithNothingToSaveTheParticipantWritesInATransactionOfItsOwn() throws {
        let container = try makeContainer()
        let recorder = Recorder()
        try ModelContext(container).save(with: recorder)
        XCTAssertEqual(recorder.shown.map(\.inserted.count), [0])
        XCTAssertNil(recorder.shown.first?.historyToken)
        XCTAssertEqual(try participantKeys(container), ["save 1"])
        XCTAssertEqual(try historyTokens(container), [], "no save, no history entry")
    }

    /// A save whose only change another context made first (the same
    /// delete) has nothing left to write once it merges: the participant
    /// still writes, in a transaction of its own.
    func testAParticipantWritesWhenTheMergeLeavesNothingToSave() throws {
        let container = try makeContainer()
        let memo = Memo(title: "gone", body: "", priority: 1)
        let setup = ModelContext(container)
        setup.insert(memo)
        try setup.save()
        let id = memo.persistentModelID
        let context = ModelContext(container)
        context.delete(context.model(for: id))
        let other = ModelContext(container)
        other.delete(other.model(for: id))
        try other.save()
        XCTAssertTrue(context.hasChanges)
        let recorder = Recorder()
        try context.save(with: recorder)
        XCTAssertEqual(try count(Memo.self, in: container), 0)
        XCTAssertEqual(try participantKeys(container), ["save 1"], "the participant's trees are written")
    }

    func testAContainerOfSeveralStoresRefusesAParticipant() throws {
        let first = ModelConfiguration("first", schema: Schema([Memo.self]), url: storeURL("first.store"))
        let second = ModelConfiguration("second", schema: Schema([Voyage.self]), url: storeURL("second.store"))
        let container = try track(ModelContainer(for: Schema([Memo.self, Voyage.self]), configurations: [first, second]))
        let context = ModelContext(container)
        context.insert(Memo(title: "m", body: "", priority: 1))
        let recorder = Recorder()
        XCTAssertThrowsError(try context.save(with: recorder)) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .loadIssueModelContainer, "\(error)")
        }
        XCTAssertTrue(recorder.shown.isEmpty)
        XCTAssertTrue(context.hasChanges)
    }

    func testHoldsKeepHistoryFromDeleteHistoryUntilReleased() throws {
        let container = try makeContainer()
        let context = ModelContext(container)
        for index in 1...5 {
            context.insert(Memo(title: "m\(index)", body: "", priority: index))
            try context.save()
        }
        try container.store.write { tx in
            try HistoryLog.hold("a", after: 2, in: tx)
            try HistoryLog.hold("b", after: 4, in: tx)
        }
        let all = HistoryDescriptor<DefaultHistoryTransaction>()
        try context.deleteHistory(all)
        XCTAssertEqual(try historyTokens(container), [3, 4, 5], "the lowest hold keeps what follows it")

        try container.store.write { tx in try HistoryLog.hold("a", after: 3, in: tx) }
        try context.deleteHistory(all)
        XCTAssertEqual(try historyTokens(container), [4, 5], "a hold moved on frees what it passed")

        try container.store.write { tx in try HistoryLog.release("a", in: tx) }
        try context.deleteHistory(all)
        XCTAssertEqual(try historyTokens(container), [5])
        XCTAssertEqual(try container.store.read { tx in try HistoryLog.heldAfter("b", in: tx) }, 4)

        // deleteAllData erases the holds with the history they held.
        try container.erase()
        XCTAssertEqual(try container.store.read { tx in try HistoryLog.deletableThrough(tx) }, .max)
    }
}

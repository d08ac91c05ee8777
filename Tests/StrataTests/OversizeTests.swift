import Foundation
import StrataEngine
import XCTest

@testable import Strata

@Model
final class Attachment {
    var name: String
    var bytes: Data
    init(name: String, bytes: Data) {
        self.name = name
        self.bytes = bytes
    }
}

/// Values too large for a key or a record: a typed error from `save()`
/// that names the model, the store unchanged, the context's changes kept.
final class OversizeTests: StoreTestCase {
    func assertRefused(
        _ context: ModelContext, naming parts: [String], file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try context.save(), file: file, line: line) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure, "\(error)", file: file, line: line)
            let message = (error as? SwiftDataError)?.message ?? ""
            for part in parts { XCTAssertTrue(message.contains(part), message, file: file, line: line) }
        }
        XCTAssertTrue(context.hasChanges, "the refused changes stay in the context", file: file, line: line)
    }

    func testAUniqueValueTooLongForAKeyIsRefusedAndCanBeShortened() throws {
        let container = try container(for: [Member.self, Tag.self])
        let context = ModelContext(container)
        context.insert(Tag(name: "kept", uses: 1))
        try context.save()
        // At the limit (a String's key is its bytes and two more) it saves.
        let longest = Tag(name: String(repeating: "a", count: Database.maxKeyLength - 2), uses: 2)
        context.insert(longest)
        try context.save()

        let tag = Tag(name: String(repeating: "x", count: 5_000), uses: 3)
        context.insert(tag)
        assertRefused(context, naming: ["Tag/p", "unique (name)", "5002 bytes", "at most \(Database.maxKeyLength)"])
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Tag>()), 2, "nothing was written")
        XCTAssertTrue(context.insertedModelsArray.contains { $0 === tag })

        // A stored model changed to a long value is refused the same way.
        tag.name = "short"
        longest.name += "b"
        assertRefused(context, naming: ["Tag/p", "unique (name)"])
        longest.name = "shortened"
        try context.save()
        let names = try ModelContext(container).fetch(FetchDescriptor<Tag>(sortBy: [SortDescriptor(\.name)])).map(\.name)
        XCTAssertEqual(names, ["kept", "short", "shortened"])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testAnIndexedValueTooLongIsRefusedAndAFetchForItFindsNothing() throws {
        let container = try container(for: [Member.self, Tag.self])
        let context = ModelContext(container)
        let long = String(repeating: "é", count: 600)  // 1,200 UTF-8 bytes
        let member = Member(email: "a@example.com", team: "t", number: 1, nickname: long)
        context.insert(member)
        assertRefused(context, naming: ["Member/p", "index (nickname)", "an index holds values of at most"])
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Member>()), 0)
        let found = try context.fetch(FetchDescriptor<Member>(predicate: #Predicate { $0.nickname == long }))
        XCTAssertEqual(found.map(\.email), ["a@example.com"], "the pending insert is still found")
        let stored = try ModelContext(container).fetch(
            FetchDescriptor<Member>(predicate: #Predicate { $0.nickname == long || ($0.nickname ?? "") >= long }))
        XCTAssertEqual(stored.count, 0)
        member.nickname = nil
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Member>()), 1)
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    func testARecordLargerThanTheStoreHoldsIsRefused() throws {
        let container = try container(for: [Attachment.self])
        let context = ModelContext(container)
        context.insert(Attachment(name: "small", bytes: Data([1, 2, 3])))
        try context.save()
        let huge = Attachment(name: "huge", bytes: Data(count: Database.maxValueLength + 1))
        context.insert(huge)
        assertRefused(context, naming: ["Attachment/p", "its record takes", "at most \(Database.maxValueLength) bytes"])
        context.delete(huge)
        try context.save()
        let names = try ModelContext(container).fetch(FetchDescriptor<Attachment>()).map(\.name)
        XCTAssertEqual(names, ["small"])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }

    /// A stored model changed past what a record holds is refused the same
    /// way: the change is patched into the stored record and measured
    /// before it is written, and the save's earlier writes roll back.
    func testAStoredRecordChangedPastTheLimitIsRefused() throws {
        let container = try container(for: [Attachment.self])
        let context = ModelContext(container)
        let first = Attachment(name: "first", bytes: Data([1]))
        let second = Attachment(name: "second", bytes: Data([2]))
        context.insert(first)
        context.insert(second)
        try context.save()
        // Written in row order: the rename first, then the refused change.
        first.name = "first, renamed"
        second.bytes = Data(count: Database.maxValueLength + 1)
        assertRefused(context, naming: ["Attachment/p", "its record takes", "at most \(Database.maxValueLength) bytes"])
        var stored = try ModelContext(container).fetch(FetchDescriptor<Attachment>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(stored.map(\.name), ["first", "second"])
        XCTAssertEqual(stored.map(\.bytes), [Data([1]), Data([2])])
        second.bytes = Data([3])
        try context.save()
        stored = try ModelContext(container).fetch(FetchDescriptor<Attachment>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(stored.map(\.name), ["first, renamed", "second"])
        XCTAssertEqual(stored.map(\.bytes), [Data([1]), Data([3])])
        XCTAssertEqual(try container.checkIntegrity(), [])
    }
}

import Foundation
import Strata
import XCTest

@testable import StrataSync

/// The change-set payload that StrataSync reads from a server: untrusted
/// bytes, refused with a reason, never trusted to fit.
final class SyncChangeSetTests: XCTestCase {
    func change(_ fields: [SyncChangeSet.Field]) -> [UInt8] {
        SyncChangeSet(changes: [SyncChangeSet.Change(kind: .insert, entity: "Note", id: SyncID.make(), fields: fields)])
            .encode()
    }

    func refused(_ bytes: [UInt8], _ reason: String, file: StaticString = #filePath, line: UInt = #line) {
        do {
            _ = try SyncChangeSet.decode(bytes)
            XCTFail("decoded", file: file, line: line)
        } catch {
            XCTAssertTrue(reason.isEmpty || error.description.contains(reason), error.description, file: file, line: line)
        }
    }

    /// The scan a push and a pull make of every change: it finds an
    /// external value wherever it sits, and answers true for bytes that do
    /// not decode (so that the decode reports them).
    func testMentionsExternalFindsExternalValuesWithoutDecoding() throws {
        let title = SyncChangeSet.Field(name: "title", wire: 2, value: [2, 0x68, 0x69])
        let scan = SyncChangeSet.Field(
            name: "scan", wire: SyncChangeSet.external, value: ExternalReference(of: Data("bytes".utf8)).encoded)
        func payload(_ changes: [SyncChangeSet.Change]) -> [UInt8] { SyncChangeSet(changes: changes).encode() }
        let plain = SyncChangeSet.Change(kind: .insert, entity: "Note", id: SyncID.make(), fields: [title])
        let deleted = SyncChangeSet.Change(kind: .delete, entity: "Note", id: SyncID.make())
        var external = plain
        external.fields.append(scan)
        XCTAssertFalse(SyncChangeSet.mentionsExternal(payload([])))
        XCTAssertFalse(SyncChangeSet.mentionsExternal(payload([plain, deleted, plain])))
        XCTAssertTrue(SyncChangeSet.mentionsExternal(payload([plain, deleted, external])))
        XCTAssertTrue(SyncChangeSet.mentionsExternal(payload([external])))
        let bytes = payload([plain, external])
        XCTAssertTrue(SyncChangeSet.mentionsExternal(Array(bytes.prefix(bytes.count / 2))))
        XCTAssertTrue(SyncChangeSet.mentionsExternal([2, 0]))
        XCTAssertTrue(SyncChangeSet.mentionsExternal([]))
    }

    func testARoundTripKeepsEveryField() throws {
        let set = SyncChangeSet(changes: [
            SyncChangeSet.Change(
                kind: .update, entity: "Note", id: SyncID.make(),
                fields: [
                    SyncChangeSet.Field(name: "title", wire: 2, value: [2, 0x68, 0x69]),
                    SyncChangeSet.Field(name: "stars", wire: 0, value: [0x96, 0x01]),
                    SyncChangeSet.Field(name: "due", wire: 3, value: []),
                    SyncChangeSet.Field(name: "folder", wire: SyncChangeSet.toOne, value: SyncID.make().bytes),
                ]),
            SyncChangeSet.Change(kind: .delete, entity: "Note", id: SyncID.make()),
        ])
        XCTAssertEqual(try SyncChangeSet.decode(set.encode()), set)
    }

    func testValuesThatCouldSmuggleFieldsAreRefused() {
        // A varint followed by more bytes would read as further fields once
        // copied into a record.
        refused(change([SyncChangeSet.Field(name: "stars", wire: 0, value: [0x01, 0x1A, 0x05])]), "not one of wire type 0")
        refused(change([SyncChangeSet.Field(name: "title", wire: 2, value: [5, 0x61])]), "not one of wire type 2")
        refused(change([SyncChangeSet.Field(name: "ratio", wire: 1, value: [0, 0, 0])]), "not one of wire type 1")
        refused(change([SyncChangeSet.Field(name: "gone", wire: 3, value: [0])]), "not one of wire type 3")
        refused(change([SyncChangeSet.Field(name: "odd", wire: 4, value: [])]), "not one of wire type 4")
        refused(change([SyncChangeSet.Field(name: "folder", wire: SyncChangeSet.toOne, value: [1, 2, 3])]), "wire type 16")
        refused(change([SyncChangeSet.Field(name: "tags", wire: SyncChangeSet.toMany, value: [1])]), "wire type 17")
        // An external value's reference: a digest, then one varint length
        // of at most 1 GiB, nothing after it.
        let digest = [UInt8](repeating: 7, count: 32)
        for bad in [
            digest, Array(digest.prefix(31)) + [1], digest + [1, 0], digest + [0x80], digest + [0x80, 0x80, 0x80, 0x80, 0x08],
        ] {
            refused(change([SyncChangeSet.Field(name: "image", wire: SyncChangeSet.external, value: bad)]), "wire type 18")
        }
        for good in [[], digest + [0], digest + [0x80, 0x80, 0x80, 0x80, 0x04]] {
            XCTAssertNoThrow(
                try SyncChangeSet.decode(
                    change([SyncChangeSet.Field(name: "image", wire: SyncChangeSet.external, value: good)])))
        }
    }

    func testOversizedAndTruncatedPayloadsAreRefused() {
        refused([UInt8](repeating: 1, count: SyncChangeSet.maximumPayload + 1), "the limit is")
        let long = String(repeating: "n", count: 2_000)
        refused(change([SyncChangeSet.Field(name: long, wire: 3, value: [])]), "a name of 2000 bytes")
        let whole = change([SyncChangeSet.Field(name: "title", wire: 2, value: [1, 0x61])])
        for cut in [1, 2, 5, whole.count - 1] { refused(Array(whole.prefix(cut)), "") }
        refused(whole + [0], "1 bytes after the changes")
        refused([2, 0], "unknown payload format 2")
        // A count larger than the bytes left is refused before anything is
        // reserved for it.
        refused([1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F], "past the end")
    }
}

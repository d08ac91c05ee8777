import Foundation
import StrataTesting
import XCTest

@testable import Strata

@Model
final class Photo {
    var caption: String
    @Attribute(.externalStorage) var pixels: Data
    @Attribute(.externalStorage) var thumbnail: Data?
    @Attribute(.ephemeral) var isSelected = false
    @Attribute(.preserveValueOnDeletion) var takenBy = ""

    init(caption: String, pixels: Data) {
        self.caption = caption
        self.pixels = pixels
    }
}

/// `.externalStorage` (data outside the record, compressed when that
/// helps, loaded on first access) and `.ephemeral` (tracked, not stored).
final class AttributeOptionTests: StoreTestCase {
    func container() throws -> ModelContainer { try container(for: [Photo.self]) }

    func stored(_ tree: String, in container: ModelContainer) throws -> [[UInt8]] {
        try container.store.database.read { tx in try tx.treeIfPresent(tree).map { try tx.scan($0).map(\.value) } ?? [] }
    }

    func testExternalDataLivesOutsideTheRecordCompressedWhenThatHelps() throws {
        let container = try container()
        let pattern = Data((0..<100_000).map { UInt8($0 % 7) })
        var generator = SeededRandom(seed: 7)
        let noise = Data((0..<5_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        do {
            let context = ModelContext(container)
            let photo = Photo(caption: "sea", pixels: pattern)
            photo.thumbnail = noise
            context.insert(photo)
            try context.save()
        }
        let record = try XCTUnwrap(stored("e.Photo", in: container).first)
        XCTAssertLessThan(record.count, 100, "the record holds no pixels")
        let pixels = try XCTUnwrap(stored("x.Photo.pixels", in: container).first)
        XCTAssertEqual(pixels.first, 1, "compressed")
        XCTAssertLessThan(pixels.count, 10_000)
        let thumbnail = try XCTUnwrap(stored("x.Photo.thumbnail", in: container).first)
        XCTAssertEqual(thumbnail.first, 0, "random bytes do not compress: stored as they are")

        let context = ModelContext(container)
        let photo = try XCTUnwrap(context.fetch(FetchDescriptor<Photo>()).first)
        guard case .external? = photo._strataState.faults[1] else { return XCTFail("not loaded before first access") }
        XCTAssertEqual(photo.pixels, pattern)
        XCTAssertEqual(photo.thumbnail, noise)
        XCTAssertEqual(photo.caption, "sea")

        photo.thumbnail = nil
        photo.caption = "ocean"
        try context.save()
        XCTAssertEqual(try stored("x.Photo.thumbnail", in: container).count, 0, "nil removes the stored data")
        let again = try XCTUnwrap(ModelContext(container).fetch(FetchDescriptor<Photo>()).first)
        XCTAssertNil(again.thumbnail)
        XCTAssertEqual(again.pixels, pattern, "data not loaded before the save is kept")

        context.delete(photo)
        try context.save()
        XCTAssertEqual(try stored("x.Photo.pixels", in: container).count, 0, "deleting the model removes its data")
    }

    func testDamagedExternalDataReadsAsEmptyWithoutATrap() throws {
        let container = try container()
        let context = ModelContext(container)
        context.insert(Photo(caption: "x", pixels: Data(repeating: 1, count: 1_000)))
        try context.save()
        try container.store.database.write { tx in
            let tree = try tx.tree("x.Photo.pixels")
            let key = try XCTUnwrap(tx.scan(tree).first?.key)
            try tx.put(key, [1, 0xE8, 0x07, 0xFF, 0x00, 0x13], in: tree)
        }
        let photo = try XCTUnwrap(ModelContext(container).fetch(FetchDescriptor<Photo>()).first)
        XCTAssertEqual(photo.pixels, Data())
    }

    func testEphemeralAttributesAreTrackedButNotStored() throws {
        let container = try container()
        let context = ModelContext(container)
        let photo = Photo(caption: "x", pixels: Data([1, 2, 3]))
        context.insert(photo)
        try context.save()
        photo.isSelected = true
        XCTAssertTrue(photo.hasChanges, "a change to an ephemeral attribute is tracked")
        try context.save()
        XCTAssertTrue(photo.isSelected)
        let fresh = try XCTUnwrap(ModelContext(container).fetch(FetchDescriptor<Photo>()).first)
        XCTAssertFalse(fresh.isSelected, "a loaded model starts with the default")
    }

    func testExternalStorageOnANonDataAttributeIsRefused() {
        XCTAssertNoThrow(try container())
        XCTAssertThrowsError(
            try ModelContainer(for: BadlyStored.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        ) { error in
            XCTAssertEqual(error as? SwiftDataError, .unknownSchema)
            XCTAssertTrue("\(error)".contains("BadlyStored.name: .externalStorage"), "\(error)")
        }
    }
}

@Model
final class BadlyStored {
    @Attribute(.externalStorage) var name: String
    init(name: String) { self.name = name }
}

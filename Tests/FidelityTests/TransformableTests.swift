import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

/// `.transformable(by:)` stores what its transformer makes and reads it back
/// through the reverse transformation; a transformer that fails gives a
/// typed error, never a trap, and a failed save changes nothing.
nonisolated final class TransformableTests: FidelityTestCase {
    override func setUp() {
        super.setUp()
        SwatchTransformer.made = []
        SwatchTransformer.given = []
        ValueTransformer.setValueTransformer(TagListTransformer(), forName: TagListTransformer.name)
    }

    func testAValueIsStoredAsTheTransformersDataAndReadBack() throws {
        let teal = Swatch(red: 0, green: 128, blue: 128)
        do {
            let context = ModelContext(try container(Paint.self))
            context.insert(Paint(name: "Teal", swatch: teal, tags: ["cool", "calm"]))
            context.insert(Paint(name: "Plain", swatch: Swatch(red: 9, green: 9, blue: 9)))
            try context.save()
        }
        XCTAssertEqual(SwatchTransformer.made, [Data([0x5A, 0, 128, 128]), Data([0x5A, 9, 9, 9])])
        // A new container reads the store: the bytes handed back are the ones made.
        let context = ModelContext(try container(Paint.self))
        let paints = try context.fetch(FetchDescriptor<Paint>(sortBy: [SortDescriptor(\.name)]))
        XCTAssertEqual(paints.map(\.name), ["Plain", "Teal"])
        XCTAssertEqual(Set(SwatchTransformer.given), Set(SwatchTransformer.made))
        let loaded = try XCTUnwrap(paints.last)
        XCTAssertEqual([loaded.swatch.red, loaded.swatch.green, loaded.swatch.blue], [0, 128, 128])
        XCTAssertNil(loaded.accent, "nil is stored as nil; the transformer never sees it")
        XCTAssertEqual(loaded.tags, ["cool", "calm"], "the transformer registered by name")
        XCTAssertNil(paints.first?.tags)
        // A change is written through the transformer too.
        loaded.accent = Swatch(red: 255, green: 0, blue: 0)
        try context.save()
        let again = try ModelContext(try container(Paint.self)).fetch(
            FetchDescriptor<Paint>(predicate: #Predicate { $0.name == "Teal" }))
        XCTAssertEqual(again.first?.accent?.red, 255)
    }

    func testTheTransformerIsFoundByTheNameItIsRegisteredUnder() throws {
        XCTAssertTrue(ValueTransformer(forName: TagListTransformer.name) is TagListTransformer)
        XCTAssertTrue(ValueTransformer.valueTransformerNames().contains(TagListTransformer.name))
        XCTAssertNil(ValueTransformer(forName: NSValueTransformerName("NoSuchTransformer")))
        let attribute = try XCTUnwrap(Schema([Paint.self]).entitiesByName["Paint"]?.attributesByName["swatch"])
        XCTAssertTrue(attribute.isTransformable)
        XCTAssertEqual(attribute.options, [.transformable(by: String(reflecting: SwatchTransformer.self))])
        XCTAssertTrue(String(reflecting: SwatchTransformer.self).hasSuffix(".SwatchTransformer"))
    }

    func testATransformerThatReturnsNoDataFailsTheSaveAndChangesNothing() throws {
        let container = try container(Poster.self)
        let context = ModelContext(container)
        context.insert(Poster(title: "kept"))
        try context.save()
        let poster = Poster(title: "bad", swatch: Swatch(red: 1, green: 2, blue: 3))
        context.insert(poster)
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
            let message = "\(error)"
            XCTAssertTrue(message.contains("Poster.swatch"), message)
            XCTAssertTrue(message.contains("TextTransformer returned a String"), message)
        }
        XCTAssertTrue(context.hasChanges, "the context keeps its changes")
        XCTAssertEqual(poster.title, "bad")
        let stored = try ModelContext(container).fetch(FetchDescriptor<Poster>())
        XCTAssertEqual(stored.map(\.title), ["kept"], "the store is unchanged")
        // Fixing the value lets the same save through.
        poster.swatch = nil
        try context.save()
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Poster>()), 2)
    }

    func testATransformerThatReadsBackTheWrongTypeFailsTheFetch() throws {
        let container = try ModelContainer(
            for: Stencil.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let writer = ModelContext(container)
        writer.insert(Stencil(title: "star", swatch: Swatch(red: 1, green: 1, blue: 1)))
        try writer.save()
        XCTAssertThrowsError(try ModelContext(container).fetch(FetchDescriptor<Stencil>())) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
            let message = "\(error)"
            XCTAssertTrue(message.contains("OneWayTransformer"), message)
            XCTAssertTrue(message.contains("swatch"), message)
        }
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Stencil>()), 1)
    }

    func testAnUnregisteredTransformerNameFailsTheSave() throws {
        let container = try container(Label.self)
        let context = ModelContext(container)
        context.insert(Label(text: "no swatch"))
        try context.save()
        context.insert(Label(text: "swatch", swatch: Swatch(red: 0, green: 0, blue: 0)))
        XCTAssertThrowsError(try context.save()) { error in
            XCTAssertEqual(error as? SwiftDataError, .modelValidationFailure)
            XCTAssertTrue("\(error)".contains("NoSuchTransformer"), "\(error)")
        }
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Label>()), 1)
    }
}

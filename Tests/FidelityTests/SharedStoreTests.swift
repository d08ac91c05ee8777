import FidelitySupport
import Foundation
import Strata
import StrataTesting
import XCTest

/// Two containers on one file in one process, as SwiftData allows.
nonisolated final class SharedStoreTests: FidelityTestCase {
    func testTwoContainersOnOneFileSeeAndMergeEachOthersSaves() throws {
        let first = ModelContext(try container(Recipe.self))
        let second = ModelContext(try container(Recipe.self))
        let toast = Recipe(name: "Toast")
        first.insert(toast)
        try first.save()
        let seen = try XCTUnwrap(try second.fetch(FetchDescriptor<Recipe>()).first, "the other container's save")
        XCTAssertEqual(seen.servings, 2)
        toast.servings = 3
        try first.save()
        _ = try second.fetch(FetchDescriptor<Recipe>())
        XCTAssertEqual(seen.servings, 3, "a registered model takes the other container's save")
        seen.name = "French toast"
        try second.save()
        XCTAssertEqual(try first.fetch(FetchDescriptor<Recipe>()).map(\.name), ["French toast"])
    }

    func testAReadOnlyContainerBesideAWritableOne() throws {
        let writable = try container(Recipe.self)
        let url = URL(fileURLWithPath: directory.file("app.store"))
        let readOnly = try ModelContainer(
            for: Recipe.self, configurations: ModelConfiguration(url: url, allowsSave: false))
        let writer = ModelContext(writable)
        writer.insert(Recipe(name: "Soup"))
        try writer.save()
        let reader = ModelContext(readOnly)
        XCTAssertEqual(try reader.fetch(FetchDescriptor<Recipe>()).map(\.name), ["Soup"])
        reader.insert(Recipe(name: "Not saved"))
        XCTAssertThrowsError(try reader.save()) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .readOnlyStore)
        }
        XCTAssertEqual(try writer.fetchCount(FetchDescriptor<Recipe>()), 1)
    }

    func testAnotherSchemaOnAnOpenFileIsAClearError() throws {
        let open = try container(Recipe.self)
        XCTAssertThrowsError(try container(Habit.self)) { error in
            XCTAssertEqual((error as? SwiftDataError)?.code, .loadIssueModelContainer)
            XCTAssertTrue("\(error)".contains("another schema"), "\(error)")
        }
        withExtendedLifetime(open) {}
    }

    func testTheFileClosesWithTheLastContainer() throws {
        var first: ModelContainer? = try container(Recipe.self)
        let second = try container(Recipe.self)
        first = nil
        XCTAssertNil(first)
        let context = ModelContext(second)
        context.insert(Recipe(name: "Still open"))
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1)
    }
}

/// One file reached through a symbolic link to its directory is still one
/// store.
nonisolated final class SharedStorePathTests: FidelityTestCase {
    func testALinkedDirectoryNamesTheSameStore() throws {
        let real = directory.file("real")
        let link = directory.file("link")
        try FileManager.default.createDirectory(atPath: real, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        let first = try ModelContainer(
            for: Recipe.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: link + "/app.store")))
        let second = try ModelContainer(
            for: Recipe.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: real + "/app.store")))
        let context = ModelContext(first)
        context.insert(Recipe(name: "Soup"))
        try context.save()
        XCTAssertEqual(try ModelContext(second).fetchCount(FetchDescriptor<Recipe>()), 1)
    }
}

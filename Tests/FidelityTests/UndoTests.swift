import FidelitySupport
import Foundation
import Strata
import XCTest

/// `ModelContext.undoManager`, as SwiftData apps use it.
nonisolated final class UndoTests: FidelityTestCase {
    private func context() throws -> (ModelContext, UndoManager) {
        let context = ModelContext(try container(Recipe.self))
        let undoManager = UndoManager()
        context.undoManager = undoManager
        return (context, undoManager)
    }

    func testAttributeChangesUndoAndRedoBeforeAndAfterASave() throws {
        let (context, undo) = try context()
        let soup = Recipe(name: "Soup", servings: 2)
        context.insert(soup)
        try context.save()
        undo.removeAllActions()

        soup.servings = 4
        soup.tags = ["hot"]
        XCTAssertTrue(undo.canUndo)
        undo.undo()  // the tags change (each change outside a group is a group)
        XCTAssertEqual(soup.tags, [])
        XCTAssertEqual(soup.servings, 4)
        undo.undo()
        XCTAssertEqual(soup.servings, 2)
        XCTAssertTrue(undo.canRedo)
        undo.redo()
        XCTAssertEqual(soup.servings, 4)

        // After a save, undo changes the model again and the context has
        // changes to save.
        try context.save()
        XCTAssertFalse(context.hasChanges)
        undo.undo()
        XCTAssertEqual(soup.servings, 2)
        XCTAssertTrue(context.hasChanges)
        try context.save()
        let stored = try ModelContext(try container(Recipe.self)).fetch(FetchDescriptor<Recipe>())
        XCTAssertEqual(stored.map(\.servings), [2])
    }

    func testGroupsNamesAndLevels() throws {
        let (context, undo) = try context()
        let soup = Recipe(name: "Soup")
        context.insert(soup)
        undo.removeAllActions()
        undo.beginUndoGrouping()
        soup.name = "Leek soup"
        soup.servings = 6
        soup.rating = 5
        undo.setActionName("Edit Recipe")
        undo.endUndoGrouping()
        XCTAssertEqual(undo.undoActionName, "Edit Recipe")
        XCTAssertEqual(undo.undoMenuItemTitle, "Undo Edit Recipe")
        undo.undo()
        XCTAssertEqual([soup.name, "\(soup.servings)", "\(soup.rating)"], ["Soup", "2", "0.0"])
        XCTAssertEqual(undo.redoActionName, "Edit Recipe")
        undo.redo()
        XCTAssertEqual(soup.name, "Leek soup")
        XCTAssertEqual(soup.servings, 6)

        undo.removeAllActions()
        undo.levelsOfUndo = 2
        for servings in 10..<15 { soup.servings = servings }
        undo.undo()
        undo.undo()
        XCTAssertFalse(undo.canUndo, "only two levels are kept")
        XCTAssertEqual(soup.servings, 12)

        undo.removeAllActions()
        undo.disableUndoRegistration()
        soup.servings = 99
        undo.enableUndoRegistration()
        XCTAssertFalse(undo.canUndo)
    }

    func testInsertAndDeleteWithCascadeBeforeASave() throws {
        let (context, undo) = try context()
        let soup = Recipe(name: "Soup")
        context.insert(soup)
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1)
        undo.undo()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 0, "the insert is undone")
        undo.redo()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Recipe>()), 1)
        soup.ingredients = [Ingredient(name: "leek"), Ingredient(name: "salt")]
        try context.save()
        undo.removeAllActions()

        context.delete(soup)
        XCTAssertTrue(soup.isDeleted)
        XCTAssertTrue(soup.ingredients.allSatisfy(\.isDeleted), "the cascade is part of the delete")
        undo.undo()
        XCTAssertFalse(soup.isDeleted)
        XCTAssertFalse(soup.ingredients.contains(where: \.isDeleted))
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Ingredient>()), 2)
    }

    func testDeleteWithCascadeUndoneAfterTheSave() throws {
        let (context, undo) = try context()
        let soup = Recipe(name: "Soup", servings: 3)
        context.insert(soup)
        soup.ingredients = [Ingredient(name: "leek"), Ingredient(name: "salt")]
        try context.save()
        undo.removeAllActions()

        undo.beginUndoGrouping()
        context.delete(soup)
        undo.endUndoGrouping()
        try context.save()
        XCTAssertEqual(try context.fetchCount(FetchDescriptor<Ingredient>()), 0)

        undo.undo()
        XCTAssertTrue(context.hasChanges)
        try context.save()
        let fresh = ModelContext(try container(Recipe.self))
        let restored = try XCTUnwrap(try fresh.fetch(FetchDescriptor<Recipe>()).first)
        XCTAssertEqual(restored.servings, 3)
        XCTAssertEqual(Set(restored.ingredients.map(\.name)), ["leek", "salt"])

        undo.redo()
        try context.save()
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Recipe>()), 0)
        XCTAssertEqual(try fresh.fetchCount(FetchDescriptor<Ingredient>()), 0)
    }

    func testRelationshipChangesUndoWithTheirInverse() throws {
        let (context, undo) = try context()
        let soup = Recipe(name: "Soup")
        let stew = Recipe(name: "Stew")
        let leek = Ingredient(name: "leek")
        context.insert(soup)
        context.insert(stew)
        soup.ingredients = [leek]
        try context.save()
        undo.removeAllActions()

        leek.recipe = stew
        XCTAssertEqual(soup.ingredients.count, 0)
        XCTAssertEqual(stew.ingredients.map(\.name), ["leek"])
        undo.undo()
        XCTAssertTrue(leek.recipe === soup)
        XCTAssertEqual(soup.ingredients.map(\.name), ["leek"])
        XCTAssertEqual(stew.ingredients.count, 0)
        undo.redo()
        XCTAssertTrue(leek.recipe === stew)
        XCTAssertEqual(stew.ingredients.map(\.name), ["leek"])
        try context.save()
    }

    func testUndoingADeleteKeepsTheChangesMadeBeforeIt() throws {
        let (context, undo) = try context()
        let soup = Recipe(name: "Soup")
        context.insert(soup)
        try context.save()
        undo.removeAllActions()
        soup.name = "Leek soup"
        context.delete(soup)
        undo.undo()  // the delete
        XCTAssertFalse(soup.isDeleted)
        XCTAssertTrue(context.hasChanges)
        try context.save()
        XCTAssertEqual(try ModelContext(try container(Recipe.self)).fetch(FetchDescriptor<Recipe>()).map(\.name), ["Leek soup"])
        undo.redo()  // the delete again
        XCTAssertTrue(soup.isDeleted)
    }

    func testNoUndoManagerRecordsNothing() throws {
        let context = ModelContext(try container(Recipe.self))
        XCTAssertNil(context.undoManager)
        let soup = Recipe(name: "Soup")
        context.insert(soup)
        soup.servings = 3
        try context.save()
        XCTAssertEqual(soup.servings, 3)
    }
}

#!/usr/bin/env bash
# 24 hand-written questions on Debian's git-doc (a 57-file subset: 25 command pages as .html and
# their .txt asciidoc sources, user-manual.html, git.html, gitglossary / giteveryday /
# gittutorial.html, cmds-mainporcelain.txt, config.txt), each with the passage that answers it.
# Written by an AI agent (helper "transcript", issue 57), not by a person and not by an LLM job:
# hence --by agent. 12 exact-identifier questions (options, config variables, an error message),
# 12 paraphrases. Run from a project made by
#   rag-exp init gitdoc-evals --corpus /tmp/gitdoc/corpus --name gitdoc
# The transcript: docs/examples/gitdoc-decide-transcript.md
set -euo pipefail
RAG_EXP=${RAG_EXP:-rag-exp}
add() { "$RAG_EXP" golden add --author transcript-agent --by agent "$@"; }

# --- exact: the question names an identifier the document holds ---
add --kind exact --query "What does rebase.autoStash do?" --source-uri git-rebase.html \
    --quote "When set to true, automatically create a temporary stash entry before the operation begins, and apply it after the operation ends."
add --kind exact --query "If I push with --force-with-lease and no ref name, what exactly does it protect?" --source-uri git-push.html \
    --quote "--force-with-lease alone, without specifying the details, will protect all remote refs that are going to be updated by requiring their current value to be the same as the remote-tracking branch we have for them."
add --kind exact --query "What does push.autoSetupRemote do?" --source-uri git-config.html \
    --quote "If set to \"true\" assume --set-upstream on default push when no upstream tracking exists for the current branch"
add --kind exact --query "Where does the name of the first branch in a new repository come from, is it init.defaultBranch?" --source-uri git-init.html \
    --quote "If not specified, fall back to the default name (currently master, but this is subject to change in the future; the name can be customized via the init.defaultBranch configuration variable)."
add --kind exact --query "git merge refuses because the histories are unrelated; what does --allow-unrelated-histories change?" --source-uri git-merge.html \
    --quote "By default, git merge command refuses to merge histories that do not share a common ancestor. This option can be used to override this safety"
add --kind exact --query "What does git clone --depth do?" --source-uri git-clone.html \
    --quote "Create a shallow clone with a history truncated to the specified number of commits."
add --kind exact --query "Does git reset --hard throw away my uncommitted changes?" --source-uri git-reset.html \
    --quote "Resets the index and working tree. Any changes to tracked files in the working tree since <commit> are discarded."
add --kind exact --query "How do I keep seeing a file's history after it was renamed, with --follow?" --source-uri git-log.html \
    --quote "Continue listing the history of a file beyond renames (works only for a single file)."
add --kind exact --query "What does git commit --amend actually do to the last commit?" --source-uri git-commit.html \
    --quote "Replace the tip of the current branch by creating a new commit."
# an all-lowercase dotted name (pull.rebase, user.name) is not found in the question by itself: --identifier
add --kind exact --identifier pull.rebase --query "What happens on git pull when pull.rebase is true?" --source-uri git-config.html \
    --quote "When true, rebase branches on top of the fetched branch, instead of merging the default branch from the default remote when \"git pull\" is run."
add --kind exact --query "What is git add --intent-to-add for?" --source-uri git-add.html \
    --quote "Record only the fact that the path will be added later. An entry for the path is placed in the index with no content."
add --kind exact --identifier "not switching branches" --query "git switch stops with 'You have local changes to a file; not switching branches'. How do I switch anyway?" --source-uri git-switch.html \
    --quote "You can give the -m flag to the command, which would try a three-way merge"

# --- paraphrase: the question in other words than the passage ---
add --kind paraphrase --query "How do I undo a bad commit that others already pulled, without rewriting history?" --source-uri git-revert.html \
    --quote "revert the changes that the related patches introduce, and record some new commits that record them"
add --kind paraphrase --query "Can I have two branches checked out at the same time in different folders?" --source-uri git-worktree.html \
    --quote "A git repository can support multiple working trees, allowing you to check out more than one branch at a time."
add --kind paraphrase --query "How do I find out which change broke the build?" --source-uri git-bisect.html \
    --quote "This command uses a binary search algorithm to find which commit in your project"
add --kind paraphrase --query "I need to set my unfinished edits aside to work on something urgent; how?" --source-uri git-stash.html \
    --quote "Use git stash when you want to record the current state of the working directory and the index, but want to go back to a clean working directory."
add --kind paraphrase --query "How do I copy one fix from another branch onto mine?" --source-uri git-cherry-pick.html \
    --quote "Given one or more existing commits, apply the change each one introduces, recording a new commit for each."
add --kind paraphrase --query "How do I throw away my edits to a file and go back to the committed version?" --source-uri git-restore.html \
    --quote "Restore specified paths in the working tree with some contents from a restore source."
add --kind paraphrase --query "How can I see the edits I have made but not yet staged?" --source-uri git-diff.html \
    --quote "This form is to view the changes you made relative to the index (staging area for the next commit)."
add --kind paraphrase --query "How do I give a branch a different name?" --source-uri git-branch.html \
    --quote "With a -m or -M option, <oldbranch> will be renamed to <newbranch>."
add --kind paraphrase --query "Our server moved to a new address; how do I point my clone at it?" --source-uri git-remote.html \
    --quote "Changes URLs for the remote."
add --kind paraphrase --query "How do I set who I am so my commits carry my name and email?" --source-uri gittutorial.html \
    --quote "It is a good idea to introduce yourself to Git with your name and public email address before doing any operation."
add --kind paraphrase --query "After a merge stops half way, what do the files I have to fix look like?" --source-uri git-merge.html \
    --quote "During a merge, the working tree files are updated to reflect the result of the merge."
add --kind paraphrase --query "How do I get rid of local references to branches that were deleted on the server?" --source-uri git-fetch.html \
    --quote "Before fetching, remove any remote-tracking references that no longer exist on the remote."

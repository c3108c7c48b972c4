/*
 * The bundled example of the quick start: a parent that builds a word table, starts two workers
 * (one forks and exits, one execs /bin/true) and leaks one buffer on purpose, so the report has
 * a process tree, peaks at different times, frees, and a leak to show.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char **table(int n, size_t len)
{
	char **words = calloc(n, sizeof(char *));

	for (int i = 0; i < n; i++) {
		words[i] = malloc(len);
		snprintf(words[i], len, "word-%d", i);
	}
	return words;
}

static void drop(char **words, int n)
{
	for (int i = 0; i < n; i++)
		free(words[i]);
	free(words);
}

int main(void)
{
	char **words = table(10000, 48);
	pid_t worker = fork();

	if (worker == 0) {
		char **mine = table(50000, 96); /* the child's peak: about 5 MiB */
		drop(mine, 50000);
		_exit(0);
	}
	pid_t helper = fork();
	if (helper == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	waitpid(worker, NULL, 0);
	waitpid(helper, NULL, 0);

	char *grow = NULL;
	for (size_t size = 1024; size <= 1 << 20; size *= 2)
		grow = realloc(grow, size);
	free(grow);
	drop(words, 10000);

	char *leak = malloc(4096); /* never freed: shows up as a leak */
	strcpy(leak, "leaked on purpose");
	printf("example: done (%s)\n", leak);
	return 0;
}
